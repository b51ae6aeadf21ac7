"""Scaling-target adapters: the App Service Plan through azure-mgmt-web (``appservice.py``), its
contract and SKU limits (``base.py``), an in-memory plan (``memory.py``), a local ARM endpoint for
tests and the demo (``local_arm.py``) and the adapter from settings (``factory.py``).

May import ``domain``, ``settings`` and the SDKs; not ``sources``/``storage`` (adapters are
independent of each other) nor anything above (services, the composition root, functions)."""
