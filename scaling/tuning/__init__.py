"""The offline tuning job (PySpark) and its inputs: the history format (``history.py``),
``export-history`` from the Table (``export.py``), the job in steps (``job.py`` runs
``transforms``, ``recovery``, ``planning``, ``choice``, ``report``; Spark plumbing in
``spark_io.py``; executor tasks in ``tasks.py``) and ``bench-tune``.

Its own stack over ``simulation`` and ``domain``; may also read the history table through
``storage`` and ``settings``. Never imports the services, the composition root, the functions
or the other adapters; the deployed app never imports it."""
