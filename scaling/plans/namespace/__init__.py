"""Event Hubs namespaces: the management adapter and the router (arm), the local stand-in (local)."""
