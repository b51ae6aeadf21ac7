"""Metric source adapters, one module per source kind: Event Hubs partition positions
(``eventhub.py``) with the consumer group's checkpoints and ownership (``checkpoints.py``),
Service Bus counts (``servicebus.py``); ``factory.py`` builds the readers from settings,
``standins.py`` holds fakes for tests and benches.

Each reader satisfies ``base.SourceReader``. May import ``domain``, ``settings`` and the SDKs;
not ``storage``/``plans`` (adapters are independent of each other) nor anything above (services,
the composition root, functions)."""
