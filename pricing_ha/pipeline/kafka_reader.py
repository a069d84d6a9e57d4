"""Kafka topics as Spark DataFrames, through Spark's built-in ``kafka`` source.

The source is the connector ``spark-sql-kafka-0-10`` that :mod:`pricing_ha.pipeline.session`
puts on the classpath. Every read here:

* gives the connector's columns with ``includeHeaders=true``, less ``timestampType``
  (:data:`KAFKA_SCHEMA`; ``headers`` is null, not empty, for a record without any): what every
  transform of :mod:`pricing_ha.pipeline.decode` takes;
* reads ``read_committed`` (``kafka.isolation.level``): the relay writes ``prices`` in
  transactions, and a record of an aborted or still open transaction is not a price. The
  source's "latest" is then the last stable offset, so a batch read to the end never waits
  for an open transaction;
* authenticates as the service's clients do: ``[broker]`` translated for the Java client by
  :func:`~pricing_ha.config.java_client_properties`, every property prefixed ``kafka.``.

Offsets given as JSON follow the connector's layout, ``{"topic": {"0": 42}}``, and must name
every partition of the topics read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from pricing_ha.config import BrokerConfig, java_client_properties
from pricing_ha.errors import SparkConnectorError

__all__ = [
    "KAFKA_COLUMNS",
    "KAFKA_SCHEMA",
    "Offsets",
    "read_topics",
    "reader_options",
    "stream_topics",
]

#: The built-in connector's columns (with ``includeHeaders``), minus ``timestampType``.
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, headers array<struct<key: string, value: binary>>"
)
KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "headers"]

#: ``{topic: {"partition": offset}}``, the connector's JSON layout.
Offsets = dict[str, dict[str, int]]


def reader_options(broker: BrokerConfig, topics: Sequence[str]) -> dict[str, str]:
    """The ``kafka`` source's options for ``topics``, batch or streaming, offsets aside.

    Raises:
        ConfigError: a ``[broker.librdkafka]`` property has no Java-client translation.
    """
    client = {f"kafka.{k}": v for k, v in java_client_properties(broker).items()}
    return {
        **client,
        "kafka.isolation.level": "read_committed",
        "subscribe": ",".join(topics),
        "includeHeaders": "true",
    }


def _offsets(value: str | Offsets) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _options(spark: SparkSession, broker: BrokerConfig, topics: Sequence[str]) -> dict[str, str]:
    """:func:`reader_options`, once the classes they name are known to be on the classpath
    (MSK IAM's are in a jar of their own): said here, not by a task failing to load them."""
    options = reader_options(broker, topics)
    key = "kafka.sasl.client.callback.handler.class"
    if (name := options.get(key)) is None:
        return options
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a classic (not Connect) session always has its gateway
    # spark.jars are in the context class loader, not in the one Class.forName would use.
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        loader.loadClass(name)
    except Exception as exc:  # py4j wraps the ClassNotFoundException in an error of its own
        raise SparkConnectorError(
            f'{name} ({key}) is not on Spark\'s classpath: for auth = "msk_iam" put the'
            " aws-msk-iam-auth jar (software.amazon.msk:aws-msk-iam-auth, with its"
            " dependencies) in the directory of the connector's jars, or add it to spark.jars"
        ) from exc
    return options


def read_topics(
    spark: SparkSession,
    broker: BrokerConfig,
    topics: Sequence[str],
    *,
    starting: str | Offsets = "earliest",
    ending: str | Offsets = "latest",
) -> DataFrame:
    """``topics`` from ``starting`` to ``ending`` (batch) as :data:`KAFKA_SCHEMA` columns.

    With ``ending="latest"`` each action on the result looks the end up again: a job that
    needs one consistent read materialises it once (``localCheckpoint``).

    Args:
        spark: the session (with the connector, :func:`~pricing_ha.pipeline.spark_session`).
        broker: the application's broker settings.
        topics: topics to read.
        starting: ``"earliest"`` or :data:`Offsets`.
        ending: ``"latest"`` (the last stable offset of each partition) or :data:`Offsets`.

    Raises:
        ConfigError: a ``[broker.librdkafka]`` property has no Java-client translation.
        SparkConnectorError: ``auth = "msk_iam"`` without the ``aws-msk-iam-auth`` jar.
    """
    df = (
        spark.read.format("kafka")
        .options(**_options(spark, broker, topics))
        .option("startingOffsets", _offsets(starting))
        .option("endingOffsets", _offsets(ending))
        .load()
    )
    return df.select(*KAFKA_COLUMNS)


def stream_topics(
    spark: SparkSession,
    broker: BrokerConfig,
    topics: Sequence[str],
    *,
    starting: str | Offsets = "earliest",
) -> DataFrame:
    """``topics`` as a streaming DataFrame of :data:`KAFKA_SCHEMA` columns.

    ``starting`` applies to a query's first run only; a query restarted over its checkpoint
    goes on from the offsets recorded there.

    Raises:
        ConfigError: a ``[broker.librdkafka]`` property has no Java-client translation.
        SparkConnectorError: ``auth = "msk_iam"`` without the ``aws-msk-iam-auth`` jar.
    """
    df = (
        spark.readStream.format("kafka")
        .options(**_options(spark, broker, topics))
        .option("startingOffsets", _offsets(starting))
        .load()
    )
    return df.select(*KAFKA_COLUMNS)
