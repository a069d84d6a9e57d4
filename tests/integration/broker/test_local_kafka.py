"""The local Apache Kafka: what the rest of the suite relies on, and its node faults."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from confluent_kafka.cimpl import NewTopic

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker import KAFKA_LIBS_ENV, LocalKafka
from pricing_ha.local.cluster import pricing_cli
from pricing_ha.local.kafka_node import free_port
from pricing_ha.local.waiting import wait_for


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
    revoked: dict[str, list[list[int]]] = {}

    def member(name: str) -> Consumer:
        owned[name], revoked[name] = set(), []

        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            owned[name] = {p.partition for p in partitions}

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            owned[name] -= {p.partition for p in partitions}
            revoked[name].append(sorted(p.partition for p in partitions))

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
    # b's own close() revoked what it held (an eager rebalance before it may have revoked too)
    assert revoked["b"][-1] == sorted(b_had)
    assert owned["a"] == set()


def _proc_state(pid: int) -> str:
    """The process's state letter from /proc (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def test_pause_silences_broker_until_resume(own_broker: LocalKafka) -> None:
    """A SIGSTOPped broker answers no metadata; after SIGCONT it answers again."""
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    admin.list_topics(timeout=5)
    own_broker.pause()
    try:
        # SIGSTOP takes effect asynchronously: ask only once the kernel reports it stopped.
        wait_for(
            lambda: _proc_state(own_broker.pid) == "T",
            5,
            "the broker process stopped",
            interval_s=0.01,
        )
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=1)
    finally:
        own_broker.resume()
    assert admin.list_topics(timeout=5).brokers


def test_stop_kills_process_and_is_idempotent(own_broker: LocalKafka) -> None:
    """stop() ends the broker process, and calling it again does nothing."""
    pid = own_broker.pid
    assert _pid_exists(pid)
    own_broker.stop()
    assert not own_broker.running
    assert not _pid_exists(pid)
    own_broker.stop()


def test_start_failure_reports_log_tail(tmp_path: Path) -> None:
    """A node that refuses its configuration raises LocalKafkaError with its log's tail."""
    kafka = LocalKafka(
        workdir=tmp_path, overrides={"num.network.threads": "many"}, startup_timeout_s=60
    )
    with pytest.raises(LocalKafkaError, match=r"num\.network\.threads") as info:
        kafka.start()
    assert "kafka node 1" in str(info.value)
    assert not kafka.running


def test_missing_jars_name_the_directory_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the jars, start says where it looked and how to get them, in one error."""
    monkeypatch.setenv(KAFKA_LIBS_ENV, str(tmp_path))
    with pytest.raises(LocalKafkaError, match=r"no Apache Kafka jars in .*scripts/jars"):
        LocalKafka(workdir=tmp_path / "kafka").start()


def _produce_all(producer: Producer, topic: str, values: range) -> None:
    failed: list[str] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for v in values:
        producer.produce(topic, value=str(v).encode(), on_delivery=report)
    assert producer.flush(30) == 0
    assert not failed, failed


def _read_all(bootstrap: str, topic: str, count: int) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[int] = []

    def all_read() -> bool:
        for msg in consumer.consume(500, 0.5):
            assert msg.error() is None, msg.error()
            got.append(int(msg.value() or b""))
        return len(got) >= count

    try:
        wait_for(all_read, 60, lambda: f"{count} records (have {len(got)})", interval_s=0)
    finally:
        consumer.close()
    return got


def test_three_nodes_lose_one_without_losing_a_write(tmp_path: Path) -> None:
    """Three nodes in racks a/b/c: acks=all writes go on through a node's SIGKILL and none is lost.

    The killed node restarts from its own log directory and rejoins the ISR.
    """
    with LocalKafka(nodes=3, workdir=tmp_path) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        meta = admin.list_topics(timeout=10)
        assert set(meta.brokers) == {1, 2, 3}
        topic = "three-nodes"
        admin.create_topics([NewTopic(topic, 1)])["three-nodes"].result(30)

        def partition() -> Any:
            return admin.list_topics(topic, timeout=5).topics[topic].partitions.get(0)

        wait_for(lambda: partition() is not None, 30, "the new topic's metadata")
        described = partition()
        assert described is not None
        assert sorted(described.replicas) == [1, 2, 3]
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
        _produce_all(producer, topic, range(500))
        victim = described.leader
        kafka.node(victim).kill()
        _produce_all(producer, topic, range(500, 1000))
        kafka.restart_node(victim)

        def back_in_isr() -> bool:
            p = partition()
            return p is not None and sorted(p.isrs) == [1, 2, 3]

        wait_for(back_in_isr, 60, "the restarted node back in the ISR")
        assert _read_all(kafka.bootstrap, topic, 1000) == list(range(1000))
        assert (kafka.node(victim).dir / "data").is_dir()


def test_broker_command_prints_bootstrap_and_stops_every_jvm_on_sigterm(tmp_path: Path) -> None:
    """`pricing-ha broker --nodes 3` prints where each node listens; SIGTERM ends every JVM."""
    log = tmp_path / "broker.out"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*pricing_cli(), "broker", "--nodes", "3", "--workdir", str(tmp_path / "kafka")],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "Apache Kafka ready" in log.read_text(), 120, "the ready message")
        text = log.read_text()
        pids = [int(p) for p in re.findall(r"pid (\d+)", text)]
        assert len(pids) == 3, text
        assert all(_pid_exists(p) for p in pids)
        bootstrap = re.search(r"ready in [\d.]+ s: (\S+)", text)
        assert bootstrap is not None, text
        meta = AdminClient({"bootstrap.servers": bootstrap[1]}).list_topics(timeout=10)
        assert set(meta.brokers) == {1, 2, 3}
        assert "REPLICATION_FACTOR=3" in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert not [p for p in pids if _pid_exists(p)]
        # The work directory was given, so each node's data outlives the command.
        assert all((tmp_path / "kafka" / f"node-{i}" / "data").is_dir() for i in (1, 2, 3))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_broker_command_runs_one_node_each_of_a_cluster_spread_over_hosts(tmp_path: Path) -> None:
    """Three `pricing-ha broker --node-id N --hosts ...` form one cluster, each on its address."""
    hosts = ("127.0.0.11", "127.0.0.12", "127.0.0.13")  # all of 127/8 is loopback on Linux
    cluster_id = "VGhyZWVIb3N0c0NsdXN0ZXI"
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    logs = [tmp_path / f"node-{i}.out" for i in (1, 2, 3)]
    try:
        for i, log in enumerate(logs, start=1):
            with log.open("wb") as out:
                argv = ["broker", "--nodes", "3", "--node-id", str(i), "--hosts", ",".join(hosts)]
                argv += [
                    "--port",
                    str(port),
                    "--cluster-id",
                    cluster_id,
                    "--startup-timeout",
                    "140",
                ]
                argv += ["--workdir", str(tmp_path / f"host-{i}")]
                procs.append(
                    subprocess.Popen([*pricing_cli(), *argv], stdout=out, stderr=subprocess.STDOUT)
                )

        def all_ready() -> bool:
            return all("Apache Kafka ready" in log.read_text() for log in logs)

        wait_for(all_ready, 150, "every node's ready message")
        texts = [log.read_text() for log in logs]
        # Each command ran its own node only, and names the whole cluster as the bootstrap.
        assert [len(re.findall(r"pid (\d+)", t)) for t in texts] == [1, 1, 1], texts
        bootstrap = ",".join(f"{h}:{port}" for h in hosts)
        assert all("ready in" in t and bootstrap in t for t in texts), texts
        meta = AdminClient({"bootstrap.servers": f"{hosts[2]}:{port}"}).list_topics(timeout=10)
        assert meta.cluster_id == cluster_id
        assert {b.id: b.host for b in meta.brokers.values()} == dict(enumerate(hosts, start=1))
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        assert [proc.wait(60) for proc in procs] == [0, 0, 0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
