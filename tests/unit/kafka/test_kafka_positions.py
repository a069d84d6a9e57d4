"""Committed start positions asked explicitly; partitions a lost offset answer left unstarted."""

from __future__ import annotations

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from pricing_ha.kafka.positions import committed_starts, restart_unstarted


class FakeConsumer:
    """Committed offsets that fail ``failures`` times first; an assignment with positions."""

    def __init__(self, committed: dict[int, int], failures: int = 0, code: int = 16) -> None:
        self.committed_offsets = committed
        self.failures = failures
        self.code = code
        self.calls = 0
        self.assigned: dict[int, int] = {}
        self.positions: dict[int, int] = {}
        self.unassigned: list[int] = []

    def committed(
        self, partitions: list[TopicPartition], timeout: float = 0
    ) -> list[TopicPartition]:
        self.calls += 1
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(self.code, "coordinator moved"))
        return [
            TopicPartition(tp.topic, tp.partition, self.committed_offsets.get(tp.partition, -1001))
            for tp in partitions
        ]

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("t", p, o) for p, o in self.assigned.items()]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition("t", tp.partition, self.positions.get(tp.partition, OFFSET_INVALID))
            for tp in partitions
        ]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.assigned[tp.partition] = tp.offset

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.unassigned.append(tp.partition)
            self.assigned.pop(tp.partition, None)


def test_a_moving_coordinator_is_asked_again_until_it_answers() -> None:
    """NOT_COORDINATOR answered at once is retried: the starts are the committed offsets."""
    consumer = FakeConsumer({0: 42}, failures=2)
    starts = committed_starts(consumer, "t", [0, 1], timeout_s=5.0)
    assert [(tp.partition, tp.offset) for tp in starts] == [(0, 42), (1, OFFSET_BEGINNING)]
    assert consumer.calls == 3


def test_other_errors_and_a_deadline_leave_the_lookup_to_librdkafka() -> None:
    """A non-coordinator error, or no answer by the deadline, gives OFFSET_INVALID starts."""
    other = FakeConsumer({0: 42}, failures=1, code=KafkaError._TRANSPORT)
    assert [tp.offset for tp in committed_starts(other, "t", [0], 5.0)] == [OFFSET_INVALID]
    assert other.calls == 1
    never = FakeConsumer({0: 42}, failures=10**6)
    assert [tp.offset for tp in committed_starts(never, "t", [0], 0.3)] == [OFFSET_INVALID]


def test_only_unstarted_partitions_are_restarted_at_their_committed_offsets() -> None:
    """A partition with a position is left alone; one without is assigned again at its commit."""
    consumer = FakeConsumer({0: 10, 1: 20})
    consumer.assigned = {0: OFFSET_INVALID, 1: OFFSET_INVALID}
    consumer.positions = {1: 25}
    assert restart_unstarted(consumer, 1.0)
    assert consumer.unassigned == [0]
    assert consumer.assigned == {0: 10, 1: OFFSET_INVALID}


def test_an_unknown_commit_asks_for_another_try() -> None:
    """While the coordinator does not answer, nothing is reassigned and the caller tries again."""
    consumer = FakeConsumer({0: 10}, failures=10**6)
    consumer.assigned = {0: OFFSET_INVALID}
    assert not restart_unstarted(consumer, 0.2)
    assert consumer.unassigned == []
