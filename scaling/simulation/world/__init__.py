"""The simulated Event Hubs world: its parameters, its physics, the loop, the traces, the judges."""
