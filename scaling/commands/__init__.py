"""Commands of ``python -m scaling`` that sit on top of the layers, so that no stack has to climb:
``simulate`` (the simulated world, writing the tuning job's history format), ``bench-collect``
(the collect service and source adapters on a local Azurite), ``bench-storage`` (the evaluate
service on Table storage on a local Azurite) and the operator command ``dead-letters`` (the
dead-letter use case in ``services/`` against the app's storage).

A command that needs only one stack lives in it (``validate-policy`` in ``domain``,
``decisions`` in ``storage``, ``benchmark`` in ``simulation``, ``tune``/``export-history``/
``bench-tune`` in ``tuning``, ``demo`` in ``local``). May import anything in ``scaling``; nothing
imports it but ``scaling.__main__`` (by name).
"""
