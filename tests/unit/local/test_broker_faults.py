"""The broker-fault helpers: look-ups against an in-memory stand-in for the admin client's
metadata, the coordinator's placement by Java's string hash, and the data wipe."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest
from confluent_kafka.admin import AdminClient

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker_faults import (
    busiest_leader,
    coordinator,
    coordinator_of,
    leader_counts,
    offsets_partition,
    partition_leaders,
    under_replicated,
    wait_full_isr,
    wipe_data,
)
from pricing_ha.local.kafka_node import KafkaNode


@dataclass
class _Partition:
    leader: int
    isrs: list[int]
    id: int = 0


@dataclass
class _Topic:
    partitions: dict[int, _Partition]
    error: object = None


@dataclass
class _Meta:
    topics: dict[str, _Topic]


@dataclass
class _FakeAdmin:
    topics: dict[str, _Topic] = field(default_factory=dict)
    calls: int = 0

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> _Meta:
        self.calls += 1
        if topic is None:
            return _Meta(dict(self.topics))
        return _Meta({topic: self.topics[topic]} if topic in self.topics else {})


def _admin(fake: _FakeAdmin) -> AdminClient:
    return cast(AdminClient, fake)


def _topic(*leaders: int, isr: int = 3) -> _Topic:
    return _Topic({p: _Partition(n, list(range(1, isr + 1)), id=p) for p, n in enumerate(leaders)})


def test_busiest_leader_is_the_node_leading_most_partitions() -> None:
    """The node with the most partitions wins; a tie goes to the lowest id; leaderless ones
    are not counted."""
    fake = _FakeAdmin({"prices": _topic(2, 3, 3, -1, 2, 3), "tied": _topic(3, 2)})
    assert partition_leaders(_admin(fake), "prices") == {0: 2, 1: 3, 2: 3, 4: 2, 5: 3}
    assert leader_counts(_admin(fake), "prices") == Counter({3: 3, 2: 2})
    assert busiest_leader(_admin(fake), "prices") == 3
    assert busiest_leader(_admin(fake), "tied") == 2


def test_busiest_leader_refuses_a_topic_with_no_leader_or_unknown() -> None:
    """No leader anywhere, or no such topic: an error naming the topic, not a made-up node."""
    fake = _FakeAdmin({"dark": _topic(-1, -1)})
    with pytest.raises(LocalKafkaError, match="dark"):
        busiest_leader(_admin(fake), "dark")
    with pytest.raises(LocalKafkaError, match="missing"):
        busiest_leader(_admin(fake), "missing")


def test_coordinator_of_names_the_node_coordinating_most_groups() -> None:
    """Two of three groups on one node: that node and those two groups; a tie goes to the
    first group's coordinator (coordinators: the leaders of the groups' offsets partitions)."""
    groups = ["p1", "p2", "p1.q", "y"]
    slots = {g: offsets_partition(g, 6) for g in groups}
    leader_of = {slots["p1"]: 1, slots["p2"]: 2, slots["p1.q"]: 2, slots["y"]: 3}
    if len(leader_of) < 4:
        pytest.skip(f"two of these names share an offsets partition: {slots}")
    offsets = {p: _Partition(leader_of.get(p, 1), [1, 2, 3], id=p) for p in range(6)}
    fake = _FakeAdmin({"__consumer_offsets": _Topic(offsets)})
    assert coordinator_of(_admin(fake), ["p1", "p2", "p1.q"]) == (2, ["p2", "p1.q"])
    assert coordinator_of(_admin(fake), ["y", "p1"]) == (3, ["y"])


def test_under_replicated_lists_partitions_short_of_replicas_or_leader() -> None:
    """A partition with two in sync, or none leading, is listed; a full one is not."""
    fake = _FakeAdmin({"t": _Topic({0: _Partition(1, [1, 2, 3]), 1: _Partition(2, [2, 3])})})
    fake.topics["u"] = _Topic({0: _Partition(-1, [1, 2, 3])})
    assert under_replicated(_admin(fake), ["t", "u", "gone"], 3) == ["t[1]", "u[0]", "gone"]


def test_wait_full_isr_returns_once_whole_and_raises_naming_what_is_short() -> None:
    """It polls until the ISR is full; with a partition that never catches up it gives up
    and says which."""
    fake = _FakeAdmin({"t": _topic(1, 2, isr=2)})
    original = fake.list_topics

    def heal_on_third_call(topic: str | None = None, timeout: float = 0) -> _Meta:
        if fake.calls >= 2:
            fake.topics["t"] = _topic(1, 2, isr=3)
        return original(topic, timeout)

    fake.list_topics = heal_on_third_call  # type: ignore[method-assign]
    assert wait_full_isr(_admin(fake), ["t"], timeout_s=10) >= 0
    assert fake.calls == 3
    stuck = _FakeAdmin({"t": _topic(1, 2, isr=2)})
    with pytest.raises(LocalKafkaError, match=r"ISR not back to 3 .*: t\[0\], t\[1\]"):
        wait_full_isr(_admin(stuck), ["t"], timeout_s=0.3)


@pytest.mark.parametrize(
    ("group", "partitions", "expected"),
    [
        ("abc", 1_000_000, 96354),  # Java: "abc".hashCode() == 96354
        ("polygenelubricants", 50, 0),  # hashCode() == Integer.MIN_VALUE; Utils.abs -> 0
        ("\u00e9t\u00e9", 1_000_000, 227_742),  # "été".hashCode(): UTF-16 units, not bytes
    ],
)
def test_offsets_partition_follows_java_string_hash(
    group: str, partitions: int, expected: int
) -> None:
    """The coordinator partition is Utils.abs(String.hashCode) mod the partition count."""
    assert offsets_partition(group, partitions) == expected


def test_coordinator_is_the_leader_of_the_groups_offsets_partition() -> None:
    """A group's coordinator is the node leading its __consumer_offsets partition."""
    leaders = [1, 2, 3, 3, 2, 1]
    fake = _FakeAdmin({"__consumer_offsets": _topic(*leaders)})
    for group in ("pricing.p1-ab", "pricing.p2-ab", "abc"):
        assert coordinator(_admin(fake), group) == leaders[offsets_partition(group, 6)]


class _Node:
    def __init__(self, path: Path, running: bool = False) -> None:
        self.dir = path
        self.node_id = 1
        self.running = running


def test_wipe_keeps_identity_and_metadata_log_and_deletes_partition_data(tmp_path: Path) -> None:
    """Partition logs and checkpoints go; meta.properties and the KRaft log stay."""
    data = tmp_path / "data"
    for d in ("prices-x-0", "__consumer_offsets-3", "__cluster_metadata-0"):
        (data / d).mkdir(parents=True)
        (data / d / "00000000000000000000.log").write_bytes(b"x")
    for f in ("meta.properties", "recovery-point-offset-checkpoint", ".kafka_cleanshutdown"):
        (data / f).write_text("x")
    gone = wipe_data(cast(KafkaNode, _Node(tmp_path)))
    assert sorted(p.name for p in data.iterdir()) == ["__cluster_metadata-0", "meta.properties"]
    assert "prices-x-0" in gone
    assert (data / "__cluster_metadata-0" / "00000000000000000000.log").exists()


def test_wipe_refuses_a_running_node(tmp_path: Path) -> None:
    """Deleting the data under a running broker is refused."""
    with pytest.raises(LocalKafkaError, match="running"):
        wipe_data(cast(KafkaNode, _Node(tmp_path, running=True)))
