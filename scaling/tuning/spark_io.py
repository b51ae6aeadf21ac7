"""The tuning job's Spark plumbing: the session (embedded on loopback or under ``spark-submit``),
shipping the ``scaling`` package to the executors, and reading and writing files on local disk
or any Hadoop file system (``abfss://``, ``hdfs://``).
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any


def build_session(master: str | None, app_name: str = "scaling-tune", extra: dict[str, str] | None = None) -> Any:
    from pyspark.sql import SparkSession

    embedded = not os.environ.get("PYSPARK_GATEWAY_PORT")
    if embedded:
        # On one machine: driver and executors talk over loopback only, never another interface.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif embedded:  # not under spark-submit: run embedded
        builder = builder.master("local[*]")
    settings = {"spark.sql.session.timeZone": "UTC"}
    if embedded:
        # Embedded on one machine: few shuffle partitions (the per-minute data is small).
        settings.update({"spark.sql.shuffle.partitions": "4", "spark.ui.showConsoleProgress": "false",
                         "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    settings.update(extra or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def build_package_zip(destination: str | Path) -> Path:
    """Zip the ``scaling`` package (Python files only) for the executors."""
    package = Path(__file__).resolve().parents[1]
    destination = Path(destination)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            archive.write(path, str(path.relative_to(package.parent)))
    return destination


def ship_package(spark: Any) -> None:
    """Make ``scaling`` importable on the executors, once per SparkContext."""
    import scaling

    context = spark.sparkContext
    if getattr(context, "_scaling_shipped", False):
        return
    if ".zip" not in str(getattr(scaling, "__file__", "")):  # not already shipped with --py-files
        directory = Path(tempfile.mkdtemp(prefix="scaling-tune-"))
        context.addPyFile(str(build_package_zip(directory / "scaling.zip")))
    context._scaling_shipped = True


# --- files on local disk or any Hadoop file system (abfss://, hdfs://) ------------------------


def has_scheme(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def write_bytes(spark: Any, path: str, data: bytes) -> None:
    if not has_scheme(path):
        local = Path(path.removeprefix("file://"))
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
        return
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    stream = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).create(hadoop_path, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()


def read_text(spark: Any, path: str) -> str:
    if not has_scheme(path):
        return Path(path.removeprefix("file://")).read_text(encoding="utf-8")
    return "\n".join(spark.sparkContext.textFile(path, 1).collect())


def join_path(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def evidence_path(out: str) -> str:
    """``out/recommended.json`` -> ``out/recommended.evidence.json``."""
    head, _, tail = out.rpartition("/")
    stem = tail[:-5] if tail.endswith(".json") else tail
    return f"{head}/{stem}.evidence.json" if head else f"{stem}.evidence.json"
