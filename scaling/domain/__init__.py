"""The functional core: lag math, metric samples and rates, the policy model and its validation,
the rule engine and its modes (``rules``, ``slo``), decisions with their reasons.

Pure and deterministic: time and state come in as values, nothing does I/O. May import only
the standard library, numpy and itself; never an SDK (azure, pyspark, pyarrow) nor any other
package of ``scaling``. Everything else may import it."""
