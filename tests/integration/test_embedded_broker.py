"""The embedded broker speaks enough real Kafka for the rest of the suite to rely on."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from pricing_ha.errors import EmbeddedBrokerError
from pricing_ha.local.broker import EmbeddedBroker
from tests.waiting import wait_for


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_broker_answers_metadata(bootstrap: str) -> None:
    """A metadata request returns at least one broker and a cluster id."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert metadata.brokers
    assert metadata.cluster_id


def test_round_trip_keeps_key_headers_and_create_time(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """Key, value, repeated headers and the producer's CreateTime survive a round trip."""
    topic = topic_factory(1)
    headers: list[tuple[str, str | bytes | None]] = [
        ("trace", b"abc"),
        ("dup", b"1"),
        ("dup", b"2"),
    ]
    an_hour_ago_ms = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": bootstrap})
    sent_ms = time.time() * 1000
    producer.produce(topic, key=b"k1", value=b"v1", headers=headers)
    producer.produce(topic, key=b"k2", value=b"v2", timestamp=an_hour_ago_ms)
    assert producer.flush(10) == 0

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received: list[Message] = []

    def both_received() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            received.append(msg)
        return len(received) >= 2

    try:
        wait_for(both_received, 15, "both records", interval_s=0)
    finally:
        consumer.close()

    assert [(m.key(), m.value()) for m in received] == [(b"k1", b"v1"), (b"k2", b"v2")]
    first, second = received
    assert first.headers() == headers
    ts_type, ts_ms = first.timestamp()
    assert ts_type == TIMESTAMP_CREATE_TIME
    assert abs(ts_ms - sent_ms) < 5_000
    assert second.timestamp() == (TIMESTAMP_CREATE_TIME, an_hour_ago_ms)


def test_group_splits_partitions_and_fires_rebalance_callbacks(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """Two members split four partitions; when one leaves, the other gets all four."""
    topic, group = topic_factory(4), unique_name("group")
    owned: dict[str, set[int]] = {}
    revoked: dict[str, list[int]] = {}

    def member(name: str) -> Consumer:
        owned[name], revoked[name] = set(), []

        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            owned[name] = {p.partition for p in partitions}

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            owned[name] -= {p.partition for p in partitions}
            revoked[name].extend(p.partition for p in partitions)

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 3000,
                "heartbeat.interval.ms": 1000,
                "partition.assignment.strategy": "range",
            }
        )
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return consumer

    a, b = member("a"), member("b")

    def split() -> bool:
        a.poll(0.05)
        b.poll(0.05)
        return len(owned["a"]) == 2 and len(owned["b"]) == 2

    def a_owns_all() -> bool:
        a.poll(0.05)
        return owned["a"] == {0, 1, 2, 3}

    wait_for(split, 30, lambda: f"a and b to own two partitions each: {owned}", interval_s=0)
    assert owned["a"] | owned["b"] == {0, 1, 2, 3}
    assert not owned["a"] & owned["b"]
    b_had = set(owned["b"])

    b.close()
    wait_for(a_owns_all, 30, lambda: f"a to own every partition: {owned}", interval_s=0)
    a_took = set(owned["a"])
    a.close()

    assert a_took == {0, 1, 2, 3}
    assert sorted(revoked["b"]) == sorted(b_had)  # b's own close() revoked what it held
    assert owned["a"] == set()


def _proc_state(pid: int) -> str:
    """The process's state letter from /proc (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def test_pause_silences_broker_until_resume(embedded_broker: EmbeddedBroker) -> None:
    """A SIGSTOPped broker answers no metadata; after SIGCONT it answers again."""
    admin = AdminClient({"bootstrap.servers": embedded_broker.bootstrap})
    admin.list_topics(timeout=5)
    embedded_broker.pause()
    try:
        # SIGSTOP takes effect asynchronously: ask only once the kernel reports it stopped.
        wait_for(
            lambda: _proc_state(embedded_broker.pid) == "T",
            5,
            "the broker process stopped",
            interval_s=0.01,
        )
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=1)
    finally:
        embedded_broker.resume()
    assert admin.list_topics(timeout=5).brokers


def test_stop_kills_process_and_is_idempotent(embedded_broker: EmbeddedBroker) -> None:
    """stop() ends the broker process, and calling it again does nothing."""
    pid = embedded_broker.pid
    assert _pid_exists(pid)
    embedded_broker.stop()
    assert not embedded_broker.running
    assert not _pid_exists(pid)
    embedded_broker.stop()


def test_start_failure_reports_log_tail(tmp_path: Path) -> None:
    """A broker process that exits during start raises EmbeddedBrokerError with its log."""
    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho 'simulated startup failure'\nexit 3\n")
    fake.chmod(0o755)
    broker = EmbeddedBroker(binary=str(fake), log_dir=tmp_path, startup_timeout_s=10)
    with pytest.raises(EmbeddedBrokerError, match="simulated startup failure") as info:
        broker.start()
    assert "status 3" in str(info.value)
    assert not broker.running
