"""Storage adapters: the history, state, decision log, dead letters and applied actions in Table
storage (``tables.py``, ``records.py``), an in-memory twin (``memory.py``), the contracts the
services use (``base.py``), clients from settings (``factory.py``) and the ``decisions`` command
(``cli.py``).

May import ``domain``, ``settings`` and the SDKs; not ``sources``/``plans`` (adapters are
independent of each other) nor anything above (services, the composition root, functions)."""
