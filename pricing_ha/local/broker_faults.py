"""Broker faults on a local three-node cluster: whom to hit, and when it has healed.

The fault tests (tests/integration/broker/test_broker_faults.py), the demo
(``pricing-ha demo --nodes 3``) and the broker-fault benchmark pick their victim from what the
cluster reports now, not from a guess (leadership and coordination move with every fault): the node
leading most partitions of a topic (:func:`leader_counts`, :func:`busiest_leader`,
:func:`partition_leaders`), the node coordinating a consumer group (:func:`coordinator`) or most of
several (:func:`coordinator_of`: the publishing groups' common-mode fault), and they wait for the
cluster to be whole again (:func:`wait_full_isr`: every partition led, every replica in sync) before
the next fault. :func:`rolling_restart` restarts every node in turn as a managed patch does;
:func:`wipe_data` deletes a stopped node's partition data, as a replaced disk would, keeping what a
separate metadata disk would keep.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.kafka_node import KafkaNode

__all__ = [
    "busiest_leader",
    "coordinator",
    "coordinator_of",
    "isr_sizes",
    "leader_counts",
    "offsets_leaders",
    "offsets_partition",
    "partition_leaders",
    "rolling_restart",
    "under_replicated",
    "wait_full_isr",
    "wipe_data",
]

# What a node keeps through a wipe: its identity (cluster and node id) and the KRaft metadata
# log, which a production deployment keeps on its own disk (metadata.log.dir).
_KEPT = frozenset({"meta.properties", "__cluster_metadata-0", "bootstrap.checkpoint"})


def leader_counts(admin: AdminClient, topic: str, timeout_s: float = 10.0) -> Counter[int]:
    """Node id -> how many partitions of ``topic`` it leads now (as metadata says)."""
    meta = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None:
        raise LocalKafkaError(f"no metadata for topic {topic}: {meta and meta.error}")
    return Counter(p.leader for p in meta.partitions.values() if p.leader >= 0)


def busiest_leader(admin: AdminClient, topic: str) -> int:
    """The node leading most partitions of ``topic`` (the lowest id among equals)."""
    counts = leader_counts(admin, topic)
    if not counts:
        raise LocalKafkaError(f"no partition of {topic} has a leader")
    return min(counts, key=lambda node: (-counts[node], node))


def partition_leaders(admin: AdminClient, topic: str, timeout_s: float = 5.0) -> dict[int, int]:
    """Partition -> the node id leading it now (partitions with no leader are left out).

    Raises:
        LocalKafkaError: the topic is unknown to the cluster.
    """
    meta = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None:
        raise LocalKafkaError(f"topic {topic!r} is not known to the cluster")
    return {p: m.leader for p, m in meta.partitions.items() if m.leader >= 0}


def coordinator(admin: AdminClient, group: str, timeout_s: float = 60.0) -> int:
    """The node id of ``group``'s group coordinator: the leader of its ``__consumer_offsets``
    partition (:func:`offsets_partition`), which is how Kafka places coordinators.

    Read from metadata rather than DescribeGroups: librdkafka 2.16's describe has aborted the
    calling process (an assertion in ``rd_kafka_enq_once``) while the offsets topic was being
    created or its leaders moved, taking a test's brokers' clean-up with it.
    """
    leaders = offsets_leaders(admin, timeout_s)
    return leaders[offsets_partition(group, len(leaders))]


def coordinator_of(
    admin: AdminClient, groups: Iterable[str], timeout_s: float = 60.0
) -> tuple[int, list[str]]:
    """The node coordinating the most of ``groups`` (ties: the first group's), and those groups.

    Raises:
        LocalKafkaError: as :func:`offsets_leaders`; or ``groups`` is empty.
    """
    names = list(groups)
    if not names:
        raise LocalKafkaError("no group to find a coordinator of")
    leaders = offsets_leaders(admin, timeout_s)
    by_group = {g: leaders[offsets_partition(g, len(leaders))] for g in names}
    counts = Counter(by_group.values())
    first = by_group[names[0]]
    node = max(counts, key=lambda n: (counts[n], n == first))
    return node, [g for g, n in by_group.items() if n == node]


def offsets_leaders(admin: AdminClient, timeout_s: float = 60.0) -> dict[int, int]:
    """Partition -> leader of ``__consumer_offsets``, once every partition has one (creating
    the topic first if need be: a group's first coordinator look-up does that)."""
    deadline = time.monotonic() + timeout_s
    asked = False
    while True:
        meta = admin.list_topics(timeout=10)
        topic = meta.topics.get("__consumer_offsets")
        if topic is not None and topic.error is None and topic.partitions:
            leaders = {p.id: p.leader for p in topic.partitions.values()}
            if all(leader >= 0 for leader in leaders.values()):
                return leaders
        elif not asked:
            _look_up_a_coordinator(",".join(f"{b.host}:{b.port}" for b in meta.brokers.values()))
            asked = True
        if time.monotonic() > deadline:
            raise LocalKafkaError("__consumer_offsets has partitions without a leader")
        time.sleep(0.2)


def _look_up_a_coordinator(bootstrap: str) -> None:
    """Make the cluster create ``__consumer_offsets``: a consumer asking for its committed
    offsets looks up its group's coordinator."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "pricing-ha-offsets-probe", "log_level": 0}
    )
    try:
        with contextlib.suppress(KafkaException):
            consumer.committed([TopicPartition("pricing-ha-offsets-probe", 0)], timeout=5)
    finally:
        consumer.close()


def offsets_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition holding ``group`` (Java's ``String.hashCode``,
    ``Utils.abs``, modulo ``offsets.topic.num.partitions``): groups in the same partition share
    a coordinator, so a test can choose names that put two groups on one node."""
    h = 0
    for unit in _utf16_units(group):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 2**31:
        h -= 2**32
    return (h & 0x7FFFFFFF) % partitions


def _utf16_units(text: str) -> Iterable[int]:
    data = text.encode("utf-16-be")
    return (int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))


def isr_sizes(admin: AdminClient, topics: list[str], timeout_s: float = 10.0) -> dict[str, int]:
    """``topic[partition]`` -> the size of its in-sync replica set, for every partition."""
    out: dict[str, int] = {}
    meta = admin.list_topics(timeout=timeout_s).topics
    for topic in topics:
        t = meta.get(topic)
        if t is None or t.error is not None:
            raise LocalKafkaError(f"no metadata for topic {topic}")
        for p in t.partitions.values():
            out[f"{topic}[{p.id}]"] = len(p.isrs)
    return out


def under_replicated(
    admin: AdminClient, topics: Iterable[str], replicas: int, timeout_s: float = 5.0
) -> list[str]:
    """``topic[partition]`` of each partition with no leader or fewer than ``replicas`` in
    sync (an unknown topic counts as one entry)."""
    out = []
    for topic in topics:
        meta = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            out.append(topic)
            continue
        out += [
            f"{topic}[{p}]"
            for p, m in sorted(meta.partitions.items())
            if m.leader < 0 or len(m.isrs) < replicas
        ]
    return out


def wait_full_isr(
    admin: AdminClient, topics: Iterable[str], replicas: int = 3, timeout_s: float = 90.0
) -> float:
    """Wait until every partition of ``topics`` has a leader and ``replicas`` in sync.

    Returns:
        The seconds it took.

    Raises:
        LocalKafkaError: not within ``timeout_s``; the message names the partitions short.
    """
    names = list(topics)
    began = time.monotonic()
    short: list[str] = names
    while time.monotonic() - began < timeout_s:
        try:
            short = under_replicated(admin, names, replicas)
        except KafkaException as exc:
            short = [f"(metadata: {exc})"]
        if not short:
            return time.monotonic() - began
        time.sleep(0.2)
    raise LocalKafkaError(
        f"ISR not back to {replicas} within {timeout_s:.0f} s: {', '.join(short[:8])}"
    )


def rolling_restart(
    kafka: LocalKafka,
    admin: AdminClient,
    topics: Iterable[str],
    *,
    stop_timeout_s: float = 60.0,
    isr_timeout_s: float = 120.0,
    on_step: Callable[[str], None] = lambda _text: None,
) -> None:
    """Restart every node in turn as a managed patch does: a controlled shutdown (SIGTERM,
    leadership moved off first), start again, wait for the full ISR of ``topics``, next.

    ``on_step`` is told of each step (``stopping broker 1``...) as it begins.
    """
    names = list(topics)
    replicas = len(kafka.nodes)
    for node in kafka.nodes:
        on_step(f"stopping broker {node.node_id} (controlled shutdown)")
        node.stop(stop_timeout_s)
        on_step(f"starting broker {node.node_id}")
        kafka.restart_node(node.node_id, timeout_s=isr_timeout_s)
        wait_full_isr(admin, names, replicas, timeout_s=isr_timeout_s)
        on_step(f"broker {node.node_id} back, every partition fully in sync")


def wipe_data(node: KafkaNode) -> list[str]:
    """Delete a stopped node's partition data (every log, checkpoint and marker under its data
    directory but its identity and metadata log); returns what was deleted.

    Started again, the node finds none of its replicas and fetches them all from the leaders.
    """
    if node.running:
        raise LocalKafkaError(f"kafka node {node.node_id} is running: stop it before wiping")
    data: Path = node.dir / "data"
    gone = []
    for entry in sorted(data.iterdir()):
        if entry.name in _KEPT:
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        gone.append(entry.name)
    return gone
