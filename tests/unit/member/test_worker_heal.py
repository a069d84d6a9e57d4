"""A partition assigned while its committed offset was unknown is restarted once it is known."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, Message

from pricing_ha.kafka.positions import any_unknown, committed_starts
from pricing_ha.local.waiting import wait_for
from pricing_ha.member.worker import HEAL_MAX_S, HEAL_RETRY_S, PartitionWorker
from tests.unit.kafka.test_kafka_positions import FakeConsumer


class _PollingConsumer(FakeConsumer):
    """The positions fake, polled by the worker thread: nothing ever arrives."""

    def poll(self, timeout: float) -> None:
        return None

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        return []

    def commit(self, **_kwargs: Any) -> None:
        """Nothing to commit."""

    def close(self) -> None:
        """Nothing to close."""


class _Worker(PartitionWorker):
    """Assigns the way the publishers and the relay do: at the committed offset, asked first."""

    def __init__(self, consumer: _PollingConsumer) -> None:
        super().__init__("heal-worker", consumer, lambda _p: True)  # type: ignore[arg-type]
        self.fake = consumer

    def assign(self, partition: int) -> None:
        starts = committed_starts(self.fake, "t", [partition], 0.05)
        self.fake.incremental_assign(starts)
        self.starting([partition], unknown=any_unknown(starts))

    def unassign(self, partition: int) -> None:
        """Nothing to release."""

    def process(self, batch: list[Message]) -> None:
        """Nothing arrives."""

    def idle(self) -> None:
        """Nothing to release."""


def test_a_start_left_to_librdkafka_is_restarted_at_the_commit_once_the_coordinator_answers() -> (
    None
):
    """A timed-out look-up assigns at OFFSET_INVALID; the worker asks again and restarts it."""
    consumer = _PollingConsumer({3: 77}, failures=3, code=KafkaError._TIMED_OUT)
    worker = _Worker(consumer)
    worker.start()
    try:
        worker.request("assign", 3)
        wait_for(lambda: 3 in consumer.assigned, 5, "partition 3 assigned")
        wait_for(
            lambda: consumer.assigned.get(3) == 77,
            10,
            lambda: f"partition 3 restarted at its commit: {consumer.assigned}",
        )
        assert consumer.unassigned == [3]  # restarted once, by the worker, not by the test
    finally:
        worker.stop()
    assert worker.error is None


def test_known_starts_schedule_no_restart() -> None:
    """Starts at known offsets ask for nothing more: no partition is assigned twice."""
    consumer = _PollingConsumer({3: 77})
    worker = _Worker(consumer)
    worker.assign(3)
    assert consumer.assigned == {3: 77}
    assert worker._heal_at is None
    timed_out = _PollingConsumer({}, failures=9, code=KafkaError._TIMED_OUT)
    assert any_unknown(committed_starts(timed_out, "t", [0], 0.05))
    assert OFFSET_INVALID not in consumer.assigned.values()


def test_a_silent_coordinator_is_asked_again_less_and_less_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While committed offsets stay unknown, restarts back off (doubling, capped), then reset."""
    now = [100.0]
    monkeypatch.setattr("pricing_ha.member.worker.time.monotonic", lambda: now[0])
    consumer = _PollingConsumer({3: 77}, failures=6, code=KafkaError._TIMED_OUT)
    worker = _Worker(consumer)
    worker.assign(3)  # the first failure: assigned at OFFSET_INVALID
    waits = []
    for _ in range(5):
        assert worker._heal_at is not None
        waits.append(round(worker._heal_at - now[0], 3))
        now[0] = worker._heal_at
        worker._heal()
    r = HEAL_RETRY_S
    assert waits == [r, r, 2 * r, 4 * r, 8 * r]
    assert worker._heal_at is not None
    assert worker._heal_at - now[0] == HEAL_MAX_S
    now[0] = worker._heal_at
    worker._heal()  # the coordinator answers: restarted, and the back-off starts over
    assert worker._heal_at is None
    assert consumer.assigned == {3: 77}
    worker.starting([3], unknown=True)
    assert worker._heal_at == now[0] + HEAL_RETRY_S
