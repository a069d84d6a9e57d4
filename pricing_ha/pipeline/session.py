"""The SparkSession of the pipeline's jobs: local by default, any cluster through ``master``.

Spark reads the topics with its own ``kafka`` source, which is not part of PySpark: the
connector (``spark-sql-kafka-0-10`` at PySpark's exact version) and the few jars it needs that
Spark lacks (``kafka-clients``, the token provider, ``commons-pool2``) are resolved with Maven
by ``scripts/jars`` into ``.jars/spark-kafka/libs`` and handed to the session as ``spark.jars``,
which Spark also ships to the executors of a cluster. ``PRICING_HA_SPARK_KAFKA_JARS`` names
another directory of jars (an installed package has no ``.jars``); put extra jars the
configuration needs there too (``aws-msk-iam-auth`` for ``auth = "msk_iam"``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from pricing_ha.errors import SparkConnectorError

__all__ = ["SPARK_KAFKA_JARS_ENV", "spark_kafka_jars", "spark_session"]

SPARK_KAFKA_JARS_ENV = "PRICING_HA_SPARK_KAFKA_JARS"
_CONNECTOR = "spark-sql-kafka-0-10_2.13"


def spark_kafka_jars() -> list[Path]:
    """The jars of Spark's Kafka connector: ``$PRICING_HA_SPARK_KAFKA_JARS`` or
    ``.jars/spark-kafka/libs`` of this checkout, every ``*.jar`` in the directory.

    Raises:
        SparkConnectorError: the directory holds no connector (``scripts/jars`` has not run),
            or one built for another Spark version than PySpark's.
    """
    configured = os.environ.get(SPARK_KAFKA_JARS_ENV)
    libs = (
        Path(configured)
        if configured
        else Path(__file__).resolve().parents[2] / ".jars" / "spark-kafka" / "libs"
    )
    jars = sorted(libs.glob("*.jar"))
    connectors = [j for j in jars if j.name.startswith(f"{_CONNECTOR}-")]
    if not connectors:
        raise SparkConnectorError(
            f"no Spark Kafka connector ({_CONNECTOR}-*.jar) in {libs}: run scripts/jars (or"
            f" scripts/bootstrap), or set {SPARK_KAFKA_JARS_ENV} to a directory holding it and"
            " its dependencies"
        )
    wanted = f"{_CONNECTOR}-{pyspark.__version__}.jar"
    if [j.name for j in connectors] != [wanted]:
        # The connector is compiled against Spark's internals: another version fails at the
        # first read with a linkage error, far from its cause.
        found = ", ".join(j.name for j in connectors)
        raise SparkConnectorError(
            f"{libs} holds {found}, but PySpark {pyspark.__version__} needs exactly {wanted}:"
            " run scripts/jars after changing either version"
        )
    return jars


def spark_session(master: str = "local[*]", app_name: str = "pricing-ha-pipeline") -> SparkSession:
    """A session (or the active one) with the settings every job relies on.

    Times are UTC (dates of the ingest's ``date`` partitions, bar boundaries); the Kafka
    connector's jars are on the classpath (:func:`spark_kafka_jars`; an already active session
    keeps the jars it was started with); the UI stays off (a local job needs no web server);
    shuffle partitions are few, since the tables are per instrument, not per record.

    Raises:
        SparkConnectorError: the connector's jars are missing (:func:`spark_kafka_jars`).
    """
    jars = spark_kafka_jars()
    # Python workers, should a job start any (UDFs, RDD functions), must run this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # Reader options carry credentials: a JAAS line (redacted by Spark's default, which
        # matches "password" in it) and a PEM private key (ssl.keystore.key), which is not.
        .config("spark.sql.redaction.options.regex", r"(?i)url|ssl\.keystore\.key")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
