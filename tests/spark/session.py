"""The test suite's one local SparkSession (``local[2]``), shared by every module that needs it.

Created on first use and kept for the rest of the session (a JVM start costs ~5-11 s); the
``spark`` fixtures of ``tests/spark`` and of the pipeline's integration tests both return it.
"""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession

from pricing_ha.pipeline.session import spark_session


@functools.cache
def local_spark() -> SparkSession:
    """The shared session (two cores, few shuffle partitions: the test data is tiny)."""
    spark = spark_session("local[2]", app_name="pricing-ha-tests")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    return spark
