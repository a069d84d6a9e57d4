"""The pipeline's Kafka reader (Spark's ``kafka`` source) and batch ingest against a real broker."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession

from pricing_ha.config import AppConfig, BrokerConfig, load_app_config
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.pipeline.ingest import ingest_batch
from pricing_ha.pipeline.kafka_reader import read_topics
from tests.conftest import TopicFactory
from tests.spark.session import local_spark

pytestmark = pytest.mark.spark

PARTITIONS = 3


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """The suite's shared ``local[2]`` session."""
    return local_spark()


def produce(bootstrap: str, topic: str, values: list[str], *, partitions: int = PARTITIONS) -> None:
    """``values`` round-robin over the partitions (value ``v`` keyed ``k:v``), lingering so that
    the broker receives multi-record batches."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    for i, v in enumerate(values):
        headers: list[tuple[str, str | bytes | None]] = (
            [("seq", str(i).encode()), ("pricing-ha-control", b"x")] if i % 7 == 0 else []
        )
        producer.produce(
            topic,
            key=f"k:{v}".encode(),
            value=v.encode(),
            partition=i % partitions,
            headers=headers,
        )
    assert producer.flush(30) == 0


def transaction(
    bootstrap: str, topic: str, values: list[str], *, commit: bool | None, partitions: int
) -> Producer:
    """``values`` written in one transaction, flushed to the log, then committed (True), aborted
    (False) or left open (None); returns the producer (an open transaction's owner)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"test-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i, v in enumerate(values):
        producer.produce(topic, key=f"k:{v}".encode(), value=v.encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    if commit is True:
        producer.commit_transaction(30)
    elif commit is False:
        producer.abort_transaction(30)
    return producer


def uncommitted_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Records a ``read_uncommitted`` consumer sees: proof that aborted ones are in the log."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex}",
            "isolation.level": "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n, eof = 0, 0
    try:
        while eof < partitions:
            for msg in consumer.consume(1000, 5.0):
                if msg.error() is None:
                    n += 1
                else:
                    eof += 1
    finally:
        consumer.close()
    return n


def values_of(spark: SparkSession, broker: BrokerConfig, topic: str) -> list[str]:
    """The values a batch read of ``topic`` to its current end returns, sorted."""
    return sorted(r.value.decode() for r in read_topics(spark, broker, [topic]).collect())


def test_batch_read_to_the_end_returns_every_record_once_as_produced(
    spark: SparkSession, bootstrap: str, topic_factory: TopicFactory
) -> None:
    """All records of a multi-partition topic, each once, with keys, values, headers, offsets
    and timestamps as produced, in the connector's columns less timestampType."""
    topic = topic_factory(PARTITIONS)
    values = [f"v{i}" for i in range(600)]
    produce(bootstrap, topic, values)

    df = read_topics(spark, BrokerConfig(bootstrap_servers=bootstrap), [topic])
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "headers"]
    rows = df.collect()
    assert len(rows) == 600
    per = {p: sum(1 for i in range(600) if i % PARTITIONS == p) for p in range(PARTITIONS)}
    assert {(r.partition, r.offset) for r in rows} == {
        (p, o) for p, n in per.items() for o in range(n)
    }
    by_value = {r.value.decode(): r for r in rows}
    for i, v in enumerate(values):
        r = by_value[v]
        assert (r.key, r.topic, r.partition) == (f"k:{v}".encode(), topic, i % PARTITIONS)
        expected = [("seq", str(i).encode()), ("pricing-ha-control", b"x")] if i % 7 == 0 else []
        # The connector gives null, not an empty array, for a record without headers.
        assert [(h.key, h.value) for h in r.headers or []] == expected
        assert (r.headers is None) == (not expected)
        assert r.timestamp is not None


def test_read_committed_hides_aborted_records_and_ends_before_an_open_transaction(
    spark: SparkSession, bootstrap: str, topic_factory: TopicFactory
) -> None:
    """An aborted transaction's records are never read; a batch read ends at the last stable
    offset while another transaction is open, and its records appear once it commits."""
    topic = topic_factory(PARTITIONS)
    broker = BrokerConfig(bootstrap_servers=bootstrap)
    transaction(bootstrap, topic, ["c1", "c2", "c3"], commit=True, partitions=PARTITIONS)
    transaction(bootstrap, topic, ["a1", "a2", "a3"], commit=False, partitions=PARTITIONS)
    produce(bootstrap, topic, ["n1", "n2"])
    open_one = transaction(bootstrap, topic, ["o1", "o2", "o3"], commit=None, partitions=PARTITIONS)
    produce(bootstrap, topic, ["after"])  # behind the open transaction: not stable yet
    assert uncommitted_count(bootstrap, topic, PARTITIONS) == 12  # a*, o* are in the log

    assert values_of(spark, broker, topic) == ["c1", "c2", "c3", "n1", "n2"]
    open_one.commit_transaction(30)
    assert values_of(spark, broker, topic) == [
        "after",
        "c1",
        "c2",
        "c3",
        "n1",
        "n2",
        "o1",
        "o2",
        "o3",
    ]


def landed_keys(spark: SparkSession, out: Path) -> list[tuple[str, int, int]]:
    """``(topic, partition, offset)`` of every landed record, sorted (repeats kept)."""
    rows = spark.read.parquet(str(out / "records")).select("topic", "partition", "offset")
    return sorted((r.topic, r.partition, r.offset) for r in rows.collect())


def test_batch_ingest_lands_each_committed_record_once_across_runs(
    spark: SparkSession, cluster: PricingCluster, tmp_path: Path
) -> None:
    """A second batch ingest lands exactly what was committed since the first (an aborted
    transaction in between included), and a third one nothing."""
    cfg: AppConfig = load_app_config(cluster.config_path)
    b, quotes, parts = cfg.broker.bootstrap_servers, cfg.topics.quotes, cfg.topics.partitions
    out = tmp_path / "ingest"
    produce(b, quotes, [f"q{i}" for i in range(20)], partitions=parts)
    produce(b, cfg.topics.prices, ["p0"], partitions=parts)
    assert ingest_batch(spark, cfg, out) == 21

    transaction(b, quotes, [f"a{i}" for i in range(8)], commit=False, partitions=parts)
    transaction(b, quotes, [f"t{i}" for i in range(6)], commit=True, partitions=parts)
    produce(b, quotes, [f"q{i}" for i in range(20, 30)], partitions=parts)
    assert ingest_batch(spark, cfg, out) == 16
    assert ingest_batch(spark, cfg, out) == 0

    landed = spark.read.parquet(str(out / "records"))
    values = sorted(r.value.decode() for r in landed.collect())
    expected = [f"q{i}" for i in range(30)] + [f"t{i}" for i in range(6)] + ["p0"]
    assert values == sorted(expected)
    keys = landed_keys(spark, out)
    assert len(keys) == len(set(keys)) == 37
