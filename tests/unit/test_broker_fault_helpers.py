"""Helpers of the broker-fault tests: coordinator placement, busiest leader, data wipe."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka.admin import AdminClient

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker_faults import (
    busiest_leader,
    coordinator,
    leader_counts,
    offsets_partition,
    wipe_data,
)
from pricing_ha.local.kafka_node import KafkaNode


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


@dataclass
class _Partition:
    id: int
    leader: int
    isrs: list[int] = field(default_factory=list)


@dataclass
class _Topic:
    partitions: dict[int, _Partition]
    error: Any = None


@dataclass
class _Meta:
    topics: dict[str, _Topic]
    brokers: dict[int, Any] = field(default_factory=dict)


class _Admin:
    def __init__(self, leaders: list[int], topic: str = "t") -> None:
        parts = {i: _Partition(i, leader) for i, leader in enumerate(leaders)}
        self.meta = _Meta({topic: _Topic(parts)})

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> _Meta:
        del topic, timeout
        return self.meta


def test_busiest_leader_counts_partitions_and_skips_leaderless_ones() -> None:
    """The node leading most partitions wins; a partition with no leader (-1) counts for none."""
    admin = cast(AdminClient, _Admin([2, 3, 3, -1, -1, -1]))
    assert leader_counts(admin, "t") == Counter({3: 2, 2: 1})
    assert busiest_leader(admin, "t") == 3


def test_coordinator_is_the_leader_of_the_groups_offsets_partition() -> None:
    """A group's coordinator is the node leading its __consumer_offsets partition."""
    leaders = [1, 2, 3, 3, 2, 1]
    admin = cast(AdminClient, _Admin(leaders, "__consumer_offsets"))
    for group in ("pricing.p1-ab", "pricing.p2-ab", "abc"):
        assert coordinator(admin, group) == leaders[offsets_partition(group, 6)]


def test_busiest_leader_of_a_leaderless_topic_is_an_error() -> None:
    """No partition with a leader: an error, not a guess."""
    with pytest.raises(LocalKafkaError, match="no partition"):
        busiest_leader(cast(AdminClient, _Admin([-1, -1])), "t")


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
