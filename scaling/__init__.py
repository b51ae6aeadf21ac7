"""The Event Hubs lag autoscaler. The layers, top to bottom, and what each may import:
docs/architecture.md (enforced by ``lint-imports``, configured in pyproject.toml)."""
