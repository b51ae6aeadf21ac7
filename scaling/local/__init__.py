"""Running the whole autoscaler on one machine: Azurite's lifecycle (``azurite.py``), a small
in-process Functions host (``host.py`` with ``bindings.py``, ``schedule.py``), the simulated hub
and its consumers (``simhub.py``) and the ``demo`` command (``demo/``).

An entry point: may import every layer of the app and the simulated world; nothing but
``commands`` imports it."""
