"""The offline simulated world: a partitioned hub, consumers on a plan and a trace, minute by
minute (``world.py``, batched variants in ``batched*.py``); the peer algorithms
(``peers.py``), the candidate policies (``candidates.py``) and the ``benchmark`` command.

Its own stack over the domain: may import ``domain`` and numpy only. ``tuning``, ``local`` and
``commands`` import it; the deployed app never does."""
