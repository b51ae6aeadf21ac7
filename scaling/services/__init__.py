"""The use cases: collect, evaluate, scale (and the reconciliation and dead-letter handling they
share).

Each service takes its adapters through small protocols (``sources/``, ``storage/``, ``plans/``
below) and the pure ``domain/``; the thin blueprints in ``functions/`` and the local host sit
above and only hand messages in. A service may import ``domain``, ``storage.base``/``records``,
``plans.base`` and ``sources.base``; nothing below imports a service.
"""
