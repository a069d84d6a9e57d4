"""Topic layout logic against fake admin clients (no broker)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from pricing_ha.config import AppConfig, TopicsConfig
from pricing_ha.errors import BrokerUnavailableError, TopicLayoutError
from pricing_ha.kafka.topics import (
    check_layout,
    create_topics,
    fetch_metadata,
    partition_counts,
    topic_specs,
)

CFG = AppConfig()
NAMES = list(CFG.topics.by_role().values())


def metadata(counts: dict[str, int]) -> SimpleNamespace:
    """Builds fake ClusterMetadata with the given partition counts."""
    topics = {
        name: SimpleNamespace(partitions=dict.fromkeys(range(n)), error=None)
        for name, n in counts.items()
    }
    return SimpleNamespace(topics=topics)


class FakeAdmin:
    """Answers list_topics from a dict of counts and records create_topics calls."""

    def __init__(self, counts: dict[str, int], fail: KafkaError | None = None) -> None:
        self.counts = dict(counts)
        self.fail = fail
        self.created: list[Any] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return metadata(self.counts)

    def create_topics(self, new_topics: list[Any], **_kwargs: Any) -> dict[str, Future[None]]:
        futures: dict[str, Future[None]] = {}
        for t in new_topics:
            self.created.append(t)
            future: Future[None] = Future()
            if self.fail is not None:
                future.set_exception(KafkaException(self.fail))
            else:
                self.counts[t.topic] = t.num_partitions
                future.set_result(None)
            futures[t.topic] = future
        return futures


def test_specs_cover_every_topic_with_equal_partitions() -> None:
    """Six topics, all with M partitions; only the NELI topic has a short retention."""
    specs = {s.name: s for s in topic_specs(TopicsConfig(partitions=6))}
    assert set(specs) == set(NAMES)
    assert {s.partitions for s in specs.values()} == {6}
    assert specs["pricing.neli"].config == {"retention.ms": "60000"}
    assert specs["prices"].config == {}


def test_replicated_topics_get_min_insync_replicas() -> None:
    """With three replicas, acks=all needs two in sync."""
    specs = topic_specs(TopicsConfig(replication_factor=3))
    assert all(s.config["min.insync.replicas"] == "2" for s in specs)


def test_four_replicas_over_two_azs_keep_two_in_sync_required() -> None:
    """RF 4 (two replicas per AZ) requires two in sync, not three: losing an AZ keeps writes."""
    specs = topic_specs(TopicsConfig(replication_factor=4))
    assert all(s.config["min.insync.replicas"] == "2" for s in specs)


def test_partition_counts_marks_missing_and_errored_topics() -> None:
    """A missing topic or one with a metadata error counts as None."""
    md = metadata({"a": 3})
    md.topics["b"] = SimpleNamespace(partitions={}, error=KafkaError(3))
    assert partition_counts(md, ["a", "b", "c"]) == {"a": 3, "b": None, "c": None}


def test_check_layout_accepts_matching_topics() -> None:
    """All six topics with M partitions pass."""
    check_layout(FakeAdmin(dict.fromkeys(NAMES, 4)), CFG)


def test_check_layout_lists_each_topic_on_mismatch() -> None:
    """A mismatch lists every topic's count, naming the missing and wrong ones."""
    counts = dict.fromkeys(NAMES, 4)
    counts["prices.raw"] = 8
    del counts["pricing.neli"]
    with pytest.raises(TopicLayoutError) as info:
        check_layout(FakeAdmin(counts), CFG)
    text = str(info.value)
    assert "pricing.neli: missing" in text
    assert "prices.raw: 8 partitions (expected 4)" in text
    assert "md.quotes: 4 partitions" in text


def test_create_makes_only_missing_topics() -> None:
    """Existing topics with the right count are kept; the others are created with config."""
    admin = FakeAdmin({"md.quotes": 4})
    result = create_topics(admin, CFG)
    assert result["md.quotes"] is False
    assert all(result[name] for name in NAMES if name != "md.quotes")
    neli = next(t for t in admin.created if t.topic == "pricing.neli")
    assert neli.config == {"retention.ms": "60000"}
    assert create_topics(admin, CFG) == dict.fromkeys(NAMES, False)


def test_create_refuses_existing_topic_with_wrong_count() -> None:
    """An existing topic with another partition count is an error, and nothing is created."""
    admin = FakeAdmin({"prices": 2})
    with pytest.raises(TopicLayoutError, match=r"prices: 2 partitions \(expected 4\)"):
        create_topics(admin, CFG)
    assert admin.created == []


def test_create_treats_concurrent_creation_as_existing() -> None:
    """TOPIC_ALREADY_EXISTS from a race is fine if the layout then checks out."""

    class RacingAdmin(FakeAdmin):
        def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Future[None]]:
            for t in new_topics:
                self.counts[t.topic] = 4
            self.fail = KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)
            return super().create_topics(new_topics, **kwargs)

    assert create_topics(RacingAdmin({}), CFG) == dict.fromkeys(NAMES, False)


def test_create_reports_broker_refusal() -> None:
    """A broker error other than 'exists' becomes a TopicLayoutError naming the topic."""
    admin = FakeAdmin({}, fail=KafkaError(KafkaError.INVALID_REPLICATION_FACTOR, "too many"))
    with pytest.raises(TopicLayoutError, match=r"refused to create md\.quotes"):
        create_topics(admin, CFG)


def test_fetch_metadata_retries_then_gives_up_with_clear_error() -> None:
    """A silent broker is retried until the deadline, then BrokerUnavailableError."""
    now = [0.0]
    calls: list[float] = []

    class DeadClient:
        def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
            calls.append(timeout)
            now[0] += 0.5
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "connection refused"))

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(BrokerUnavailableError) as info:
        fetch_metadata(DeadClient(), "h:1", 3.0, clock=lambda: now[0], sleep=sleep)
    assert len(calls) >= 3
    assert now[0] <= 3.0 + 0.5
    assert "h:1 did not answer within 3 s" in str(info.value)
    assert "connection refused" in str(info.value)


def test_fetch_metadata_recovers_after_transient_failure() -> None:
    """A broker that answers on the second attempt is fine."""
    attempts = []

    class FlakyClient:
        def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
            attempts.append(timeout)
            if len(attempts) == 1:
                raise KafkaException(KafkaError(KafkaError._TRANSPORT))
            return metadata({"x": 1})

    md = fetch_metadata(FlakyClient(), "h:1", 5.0, sleep=lambda _s: None)
    assert partition_counts(md, ["x"]) == {"x": 1}
