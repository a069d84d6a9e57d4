"""The SparkSession of the pipeline's jobs: local by default, any cluster through ``master``."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

__all__ = ["spark_session"]


def spark_session(master: str = "local[*]", app_name: str = "pricing-ha-pipeline") -> SparkSession:
    """A session (or the active one) with the settings every job relies on.

    Times are UTC (dates of the ingest's ``date`` partitions, bar boundaries); Arrow moves the
    Python data source's batches; the UI stays off (a local job needs no web server); shuffle
    partitions are few, since the tables are per instrument, not per record.
    """
    # Executors must run this interpreter, which has confluent-kafka (the Kafka reader).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
