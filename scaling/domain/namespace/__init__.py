"""Event Hubs namespaces sized in throughput units: the sizing and the consumer rule, the policy model, the queue message."""
