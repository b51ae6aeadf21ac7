"""One local Spark session for all Spark tests (local[2], no UI, few shuffle partitions)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from scaling.tuning.spark_io import build_session

    session = build_session("local[2]", "scaling-tests", {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
