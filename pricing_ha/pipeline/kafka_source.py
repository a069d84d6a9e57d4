"""Kafka topics as a Spark DataFrame: PySpark's Python Data Source API over confluent-kafka.

PySpark ships no Kafka connector (``spark-sql-kafka-0-10`` is a separate jar), so
:class:`KafkaDataSource` (format ``pricing_ha_kafka``) reads topics with manual-assign
confluent-kafka consumers: one Spark input partition per Kafka partition, the planned offsets
as JSON in the connector's layout (``{"topic": {"0": 42}}``), each range ``[start, end)`` read
exactly once by one task. The columns are those of the built-in connector with
``includeHeaders`` (:data:`KAFKA_SCHEMA`), so every transform works on either reader;
:func:`read_topics` picks the built-in ``kafka`` format when its connector is on the classpath.

Options (strings, as for any Spark source): ``kafka.bootstrap.servers``, ``subscribe``
(comma-separated topics), ``startingOffsets`` (``earliest`` or JSON), ``endingOffsets``
(``latest``, learned by reading, or JSON), ``kafka.<librdkafka property>`` passed to the
consumers, and ``mskIamRegion`` (Amazon MSK IAM: every consumer, on the driver and on the
executors, gets the token callback for that region; the ``aws`` extra must be installed where
the tasks run). As a streaming source it plans each micro-batch from the end of the previous one to
the partitions' current ends; Spark checkpoints those offsets, so a restarted query neither
loses nor repeats a record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from pricing_ha.config._msk_iam import MskIamTokenCallback, load_signer
from pricing_ha.kafka.headers import header_list
from pricing_ha.pipeline.kafka_ranges import (
    KafkaRange,
    Offsets,
    consumer_settings,
    end_offsets,
    plan_ranges,
    read_range,
    start_offsets,
)

__all__ = [
    "FORMAT",
    "KAFKA_COLUMNS",
    "KAFKA_SCHEMA",
    "KafkaDataSource",
    "builtin_kafka_available",
    "read_topics",
]

FORMAT = "pricing_ha_kafka"

#: The built-in connector's columns (with ``includeHeaders``), minus ``timestampType``.
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, headers array<struct<key: string, value: binary>>"
)
KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "headers"]

_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        (
            "headers",
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        ),
    ]
)


class _RangePartition(InputPartition):
    def __init__(self, r: KafkaRange) -> None:
        super().__init__(r)
        self.range = r


class _Options:
    def __init__(self, options: Mapping[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers")
        topics = [t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()]
        if not bootstrap or not topics:
            raise ValueError(f"{FORMAT} needs kafka.bootstrap.servers and subscribe options")
        extra = {
            k.removeprefix("kafka."): v
            for k, v in opts.items()
            if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
        }
        self._settings = consumer_settings(bootstrap, extra)
        # Kept as text: the callback is built where a consumer is (driver or executor), so
        # the reader pickles without it.
        self.msk_iam_region = opts.get("mskiamregion")
        self.topics = topics
        self.starting = opts.get("startingoffsets", "earliest")
        self.ending = opts.get("endingoffsets", "latest")

    @property
    def settings(self) -> dict[str, Any]:
        """The consumers' settings, with the MSK IAM token callback when ``mskIamRegion``."""
        if not self.msk_iam_region:
            return dict(self._settings)
        return {
            **self._settings,
            "oauth_cb": MskIamTokenCallback(self.msk_iam_region, load_signer()),
        }

    def start(self) -> Offsets:
        if self.starting == "earliest":
            return start_offsets(self.settings, self.topics)
        return _parse_offsets(self.starting, "startingOffsets")

    def end(self) -> Offsets:
        if self.ending == "latest":
            return end_offsets(self.settings, self.topics)
        return _parse_offsets(self.ending, "endingOffsets")


def _parse_offsets(text: str, option: str) -> Offsets:
    try:
        raw = json.loads(text)
        return {str(t): {str(p): int(o) for p, o in ps.items()} for t, ps in raw.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(
            f"{option} must be 'earliest'/'latest' or JSON {{topic: {{p: n}}}}"
        ) from exc


def _batches(settings: Mapping[str, Any], r: KafkaRange) -> Iterator[pa.RecordBatch]:
    for msgs in read_range(settings, r):
        rows: dict[str, list[Any]] = {name: [] for name in _ARROW_SCHEMA.names}
        for m in msgs:
            rows["key"].append(m.key())
            rows["value"].append(m.value())
            rows["topic"].append(r.topic)
            rows["partition"].append(r.partition)
            rows["offset"].append(m.offset())
            rows["timestamp"].append(datetime.fromtimestamp(m.timestamp()[1] / 1000, tz=UTC))
            rows["headers"].append([{"key": k, "value": v} for k, v in header_list(m.headers())])
        yield pa.RecordBatch.from_pydict(rows, schema=_ARROW_SCHEMA)


def _read(settings: Mapping[str, Any], partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # With nothing to read, partitions() is empty and Spark still runs one task with a
    # placeholder partition of its own: it yields nothing.
    if isinstance(partition, _RangePartition):
        yield from _batches(settings, partition.range)


class _BatchReader(DataSourceReader):
    def __init__(self, options: _Options) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ranges = plan_ranges(self.options.start(), self.options.end())
        return [_RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options.settings, partition)


class _StreamReader(DataSourceStreamReader):
    def __init__(self, options: _Options) -> None:
        self.options = options

    def initialOffset(self) -> Offsets:  # noqa: N802 - Spark's method name
        return self.options.start()

    def latestOffset(self, start: Offsets, limit: object) -> Offsets:  # noqa: N802
        end = end_offsets(self.options.settings, self.options.topics)
        # Never plan backwards: a partition the broker reports shorter keeps its start.
        for topic, parts in end.items():
            for p, stop in parts.items():
                parts[p] = max(stop, start.get(topic, {}).get(p, 0))
        return end

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        return [_RangePartition(r) for r in plan_ranges(start, end)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options.settings, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to do: positions live in Spark's checkpoint, not in consumer groups."""


class KafkaDataSource(DataSource):
    """Format ``pricing_ha_kafka``: Kafka topics, batch or streaming (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return FORMAT

    def schema(self) -> str:
        """The built-in connector's columns."""
        return KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader over the planned ranges."""
        return _BatchReader(_Options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """A micro-batch reader; Spark checkpoints its offsets."""
        return _StreamReader(_Options(self.options))


def builtin_kafka_available(spark: SparkSession) -> bool:
    """Whether the ``spark-sql-kafka`` connector is on the JVM classpath."""
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider")
    except Exception:  # noqa: BLE001 - py4j raises its own error types for a missing class
        return False
    return True


#: The built-in (Java) source's MSK IAM settings; the ``aws-msk-iam-auth`` jar must be on the
#: classpath next to ``spark-sql-kafka``.
_JAVA_MSK_IAM = {
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "AWS_MSK_IAM",
    "kafka.sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
    "kafka.sasl.client.callback.handler.class": (
        "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
    ),
}


def msk_iam_options(region: str, *, builtin: bool) -> dict[str, str]:
    """Spark reader options that authenticate with Amazon MSK IAM in ``region``.

    The Python source gets ``mskIamRegion`` and builds confluent-kafka's token callback in
    every consumer, as the service's clients do (``[broker] auth = "msk_iam"``). The built-in
    source gets the Java client's IAM login module; its jar (``aws-msk-iam-auth``) must be on
    the cluster's classpath, as ``spark-sql-kafka`` must.
    """
    if builtin:
        return dict(_JAVA_MSK_IAM)
    return {"mskIamRegion": region}


def read_topics(
    spark: SparkSession,
    bootstrap: str,
    topics: list[str],
    *,
    kafka_options: Mapping[str, str] | None = None,
    streaming: bool = False,
    use_builtin: bool | None = None,
    msk_iam_region: str | None = None,
) -> DataFrame:
    """``topics`` from the earliest offset (to the current end, in batch) as :data:`KAFKA_SCHEMA`.

    Args:
        spark: the session.
        bootstrap: ``bootstrap.servers``.
        topics: topics to read.
        kafka_options: extra client properties (``{"security.protocol": "SSL"}``...).
        streaming: a streaming DataFrame (``readStream``) instead of a batch one.
        use_builtin: the built-in ``kafka`` format; default: when its connector is present.
        msk_iam_region: authenticate with Amazon MSK IAM in this region (see
            :func:`msk_iam_options`); ``kafka_options`` then carry no TLS/SASL settings of
            their own.
    """
    builtin = builtin_kafka_available(spark) if use_builtin is None else use_builtin
    fmt = "kafka" if builtin else FORMAT
    if not builtin:
        spark.dataSource.register(KafkaDataSource)
    reader = spark.readStream if streaming else spark.read
    reader = reader.format(fmt)
    reader = reader.option("kafka.bootstrap.servers", bootstrap).option(
        "subscribe", ",".join(topics)
    )
    reader = reader.option("startingOffsets", "earliest")
    if builtin:
        reader = reader.option("includeHeaders", "true").option("failOnDataLoss", "false")
    if not streaming:
        reader = reader.option("endingOffsets", "latest")
    for k, v in (kafka_options or {}).items():
        reader = reader.option(f"kafka.{k}", v)
    if msk_iam_region:
        for k, v in msk_iam_options(msk_iam_region, builtin=builtin).items():
            reader = reader.option(k, v)
    df: DataFrame = reader.load()
    return df.select(*KAFKA_COLUMNS)
