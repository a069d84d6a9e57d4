"""The partition worker's takeover bookkeeping: deferred takeovers are retried, never lost."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import Message

from pricing_ha.member.worker import PartitionWorker, TakeoverDeferredError


class _Consumer:
    def close(self) -> None:
        """Nothing to close."""


class _Worker(PartitionWorker):
    """Fails the first ``failures`` takeovers of every partition."""

    def __init__(self, failures: int) -> None:
        super().__init__("test-worker", _Consumer(), lambda _p: True)  # type: ignore[arg-type]
        self.failures = failures
        self.routine = False
        self.attempts: dict[int, int] = {}
        self.batches: list[list[int]] = []

    def assign_many(self, partitions: list[int]) -> dict[int, TakeoverDeferredError]:
        self.batches.append(list(partitions))
        return super().assign_many(partitions)

    def assign(self, partition: int) -> None:
        self.attempts[partition] = self.attempts.get(partition, 0) + 1
        if self.attempts[partition] <= self.failures:
            raise TakeoverDeferredError(
                "broker not answering", retry_after_s=0.0, routine=self.routine
            )

    def unassign(self, partition: int) -> None:
        """Nothing to release."""

    def process(self, batch: list[Message]) -> None:
        """No input in these tests."""


def _apply(worker: _Worker, *ops: tuple[str, int]) -> list[Any]:
    events = [worker.request(op, p) for op, p in ops]
    worker._apply_commands()
    return events


def test_gains_are_taken_up_together_in_one_batch() -> None:
    """Several gains queued at once reach assign_many together (the relay rebuilds them in
    parallel), and every command's event is set."""
    worker = _Worker(failures=0)
    events = _apply(worker, ("assign", 0), ("assign", 1), ("assign", 2))
    assert worker.batches == [[0, 1, 2]]
    assert worker.active == {0, 1, 2}
    assert all(e.is_set() for e in events)


def test_a_deferred_takeover_is_reported_and_retried_until_it_succeeds() -> None:
    """A takeover that cannot be done now stays wanted, is reported, and is retried."""
    worker = _Worker(failures=2)
    _apply(worker, ("assign", 3))
    assert worker.active == set()
    assert worker.deferred == {3: "broker not answering"}
    worker._reconcile()
    assert worker.active == set()
    worker._reconcile()
    assert worker.active == {3}
    assert worker.deferred == {}
    assert worker.attempts[3] == 3


def test_a_loss_cancels_a_deferred_takeover() -> None:
    """A partition lost while its takeover was deferred is not retried any more."""
    worker = _Worker(failures=5)
    _apply(worker, ("assign", 1), ("unassign", 1))
    worker._reconcile()
    assert worker.wanted == set()
    assert worker.deferred == {}
    assert worker.attempts[1] == 1


def test_a_routine_deferral_is_logged_at_info_and_any_other_as_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A successor waiting on the owner it asked is a step of a planned move, not a problem;
    it is still reported as waiting (readiness)."""
    worker = _Worker(failures=1)
    worker.routine = True
    with caplog.at_level(logging.INFO, logger="pricing_ha.worker"):
        _apply(worker, ("assign", 4))
        worker.routine = False
        _apply(worker, ("assign", 5))
    levels = {r.getMessage(): r.levelno for r in caplog.records if "deferred" in r.getMessage()}
    assert levels == {
        "taking partition 4 deferred: broker not answering": logging.INFO,
        "taking partition 5 deferred: broker not answering": logging.WARNING,
    }
    assert worker.deferred == {4: "broker not answering", 5: "broker not answering"}
