"""The Service Bus queue: its simulated world and its benchmark."""
