"""Operator commands of ``python -m scaling`` that drive the use cases in ``services/`` against
the app's storage (the top layer, beside ``functions/``: they may import anything below)."""
