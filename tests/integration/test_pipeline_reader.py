"""The pipeline's Kafka reader (Python Data Source) against a real broker."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from pricing_ha.pipeline.kafka_ranges import consumer_settings, end_offsets
from pricing_ha.pipeline.kafka_source import FORMAT, KafkaDataSource, read_topics
from tests.conftest import TopicFactory
from tests.spark.session import local_spark

pytestmark = pytest.mark.spark

PARTITIONS = 3


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """The suite's shared ``local[2]`` session."""
    return local_spark()


def produce(bootstrap: str, topic: str, n: int, *, first: int = 0) -> dict[int, int]:
    """``n`` records round-robin over the partitions, lingering so that the broker receives
    multi-record batches, the last ones included; returns records per partition."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 200, "batch.num.messages": 64}
    )
    per: dict[int, int] = {}
    for i in range(first, first + n):
        p = i % PARTITIONS
        per[p] = per.get(p, 0) + 1
        headers: list[tuple[str, str | bytes | None]] = (
            [("seq", str(i).encode()), ("pricing-ha-control", b"x")] if i % 7 == 0 else []
        )
        producer.produce(
            topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=p, headers=headers
        )
    assert producer.flush(30) == 0
    return per


def test_reader_reads_every_record_of_a_multi_partition_topic_exactly_once(
    spark: SparkSession, bootstrap: str, topic_factory: TopicFactory
) -> None:
    """All records, each once, with keys, values, headers and offsets as produced; the end of
    each partition (the tail of a multi-record batch) is found by reading."""
    topic = topic_factory(PARTITIONS)
    per = produce(bootstrap, topic, 1000)
    settings = consumer_settings(bootstrap)
    assert end_offsets(settings, [topic]) == {topic: {str(p): n for p, n in per.items()}}

    df = read_topics(spark, bootstrap, [topic], use_builtin=False)
    assert df.rdd.getNumPartitions() == PARTITIONS
    rows = df.collect()
    assert len(rows) == 1000
    assert {(r.partition, r.offset) for r in rows} == {
        (p, o) for p, n in per.items() for o in range(n)
    }
    by_key = {r.key: r for r in rows}
    assert len(by_key) == 1000
    for i in range(1000):
        r = by_key[f"k{i}".encode()]
        assert (r.value, r.topic, r.partition) == (f"v{i}".encode(), topic, i % PARTITIONS)
        expected = [("seq", str(i).encode()), ("pricing-ha-control", b"x")] if i % 7 == 0 else []
        assert [(h.key, h.value) for h in r.headers] == expected
    assert all(r.timestamp is not None for r in rows)


def test_reader_reads_offset_ranges_given_as_json(
    spark: SparkSession, bootstrap: str, topic_factory: TopicFactory
) -> None:
    """startingOffsets/endingOffsets in the connector's JSON read exactly that slice, and a
    second read from the first read's end sees only what was produced since."""
    topic = topic_factory(PARTITIONS)
    produce(bootstrap, topic, 30)
    settings = consumer_settings(bootstrap)
    first_end = end_offsets(settings, [topic])
    spark.dataSource.register(KafkaDataSource)

    def read(start: dict[str, dict[str, int]] | str, end: dict[str, dict[str, int]]) -> set[str]:
        df = (
            spark.read.format(FORMAT)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", start if isinstance(start, str) else json.dumps(start))
            .option("endingOffsets", json.dumps(end))
            .load()
        )
        return {r.value.decode() for r in df.collect()}

    middle = {topic: {"0": 2, "1": 3, "2": 10}}
    # Round robin: record i is at partition i % 3, offset i // 3.
    assert read({topic: {"0": 1, "1": 3, "2": 0}}, middle) == {"v3"} | {
        f"v{3 * o + 2}" for o in range(10)
    }
    produce(bootstrap, topic, 9, first=30)
    second_end = end_offsets(settings, [topic])
    assert read(first_end, second_end) == {f"v{i}" for i in range(30, 39)}
