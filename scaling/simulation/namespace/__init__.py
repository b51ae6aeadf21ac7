"""Event Hubs namespaces sized in throughput units: the simulated world, its peers, its benchmark."""
