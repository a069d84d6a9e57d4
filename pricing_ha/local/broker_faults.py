"""Broker faults on a local three-node Apache Kafka: whom to hit, and when the cluster is whole.

The demo (``pricing-ha demo --nodes 3``), the broker-fault benchmark and the fault tests pick
their victims from what the cluster says now, never from a fixed node id: leadership and group
coordination move with every fault, so "broker 2" means nothing after the first one.

- :func:`partition_leaders` / :func:`busiest_leader`: who leads each partition of a topic, and
  the node leading the most of them (the broker whose loss silences the most of ``prices``).
- :func:`coordinator` / :func:`coordinator_of`: the node coordinating a consumer group
  (the ``__consumer_offsets`` partition leader for its id), and the node coordinating the most
  of several groups (the publishing groups' common-mode fault).
- :func:`wait_full_isr`: block until every partition of some topics has its full replica set
  in sync and a leader, so that the next fault starts from a whole cluster.
- :func:`rolling_restart`: stop (SIGTERM: a controlled shutdown) and restart each node in turn,
  waiting for the full ISR between nodes, as a patch of Amazon MSK does.

Every function takes an :class:`~confluent_kafka.admin.AdminClient` (or a
:class:`~pricing_ha.local.broker.LocalKafka` for actions); none of them kills anything it did
not name.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker import LocalKafka

__all__ = [
    "busiest_leader",
    "coordinator",
    "coordinator_of",
    "partition_leaders",
    "rolling_restart",
    "under_replicated",
    "wait_full_isr",
]

_POLL_S = 0.2


def partition_leaders(admin: AdminClient, topic: str, timeout_s: float = 5.0) -> dict[int, int]:
    """Partition -> the node id leading it now (partitions with no leader are left out).

    Raises:
        LocalKafkaError: the topic is unknown to the cluster.
    """
    meta = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None:
        raise LocalKafkaError(f"topic {topic!r} is not known to the cluster")
    return {p: m.leader for p, m in meta.partitions.items() if m.leader >= 0}


def busiest_leader(admin: AdminClient, topic: str) -> int:
    """The node leading the most partitions of ``topic`` (ties: the lowest node id).

    Raises:
        LocalKafkaError: no partition of the topic has a leader.
    """
    counts = Counter(partition_leaders(admin, topic).values())
    if not counts:
        raise LocalKafkaError(f"no partition of {topic!r} has a leader")
    return min(counts, key=lambda node: (-counts[node], node))


def coordinator(admin: AdminClient, group: str, timeout_s: float = 10.0) -> int:
    """The node id coordinating consumer group ``group`` (an empty group has one too).

    Raises:
        LocalKafkaError: the cluster did not say within ``timeout_s``.
    """
    future = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]
    try:
        node: int = future.result(timeout_s).coordinator.id
    except (KafkaException, TimeoutError) as exc:
        raise LocalKafkaError(f"no coordinator known for group {group!r}: {exc}") from exc
    return node


def coordinator_of(admin: AdminClient, groups: Iterable[str]) -> tuple[int, list[str]]:
    """The node coordinating the most of ``groups`` (ties: the first group's), and those groups.

    Raises:
        LocalKafkaError: as :func:`coordinator`; or ``groups`` is empty.
    """
    by_group = {g: coordinator(admin, g) for g in groups}
    if not by_group:
        raise LocalKafkaError("no group to find a coordinator of")
    counts = Counter(by_group.values())
    first = next(iter(by_group.values()))
    node = max(counts, key=lambda n: (counts[n], n == first))
    return node, [g for g, n in by_group.items() if n == node]


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
    admin: AdminClient, topics: Iterable[str], replicas: int = 3, timeout_s: float = 120.0
) -> float:
    """Block until every partition of ``topics`` has a leader and ``replicas`` in sync.

    Returns:
        The seconds it took.

    Raises:
        LocalKafkaError: not within ``timeout_s`` (the message names what was still short).
    """
    names = list(topics)
    began = time.monotonic()
    short: list[str] = names
    while time.monotonic() - began < timeout_s:
        try:
            short = under_replicated(admin, names, replicas)
        except KafkaException:
            short = names  # metadata not answered now: ask again
        if not short:
            return time.monotonic() - began
        time.sleep(_POLL_S)
    raise LocalKafkaError(
        f"not {replicas} replicas in sync within {timeout_s:.0f} s: {', '.join(short[:8])}"
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
        wait_full_isr(admin, names, replicas=replicas, timeout_s=isr_timeout_s)
        on_step(f"broker {node.node_id} back, every partition fully in sync")
