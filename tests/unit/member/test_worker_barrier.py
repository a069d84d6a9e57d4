"""The worker's NELI barrier: which revocations wait for the worker, and which do not."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Message

from neli import EventKind, LeadershipEvent
from pricing_ha.member.worker import PartitionWorker


class _Consumer:
    def close(self) -> None:
        """Nothing to close."""


class _Worker(PartitionWorker):
    """Hands over the partitions in ``handing``; its thread is never started."""

    def __init__(self, handing: set[int]) -> None:
        super().__init__("test-worker", _Consumer(), lambda _p: True)  # type: ignore[arg-type]
        self.handing = handing
        self.unassigned: list[int] = []

    def assign(self, partition: int) -> None:
        """Nothing to set up."""

    def unassign(self, partition: int) -> None:
        self.unassigned.append(partition)

    def process(self, batch: list[Message]) -> None:
        """Not used."""

    def hand_over(self, partition: int) -> bool:
        return partition in self.handing

    def will_hand_over(self, partition: int) -> bool:
        return partition in self.handing

    def turn(self) -> None:
        """What the worker thread does between batches."""
        self._apply_commands()


def _event(kind: EventKind, partition: int, reason: str) -> LeadershipEvent:
    return LeadershipEvent(
        kind=kind,
        partition=partition,
        group="g",
        member_id="m",
        member_name="m",
        reason=reason,
        at_mono=0.0,
        at_wall=0.0,
    )


async def _returns_before_the_worker_turns(worker: _Worker, event: LeadershipEvent) -> bool:
    task = asyncio.ensure_future(worker.barrier_handler(event))
    done, _ = await asyncio.wait({task}, timeout=0.5)
    if done:
        return True
    worker.turn()
    await asyncio.wait_for(task, 5)
    return False


LOSSES = [
    (EventKind.REVOKED, "rebalance"),
    (EventKind.REVOKED, "session lost"),
    (EventKind.FENCED, "heartbeat timeout"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("kind", "reason"), LOSSES)
async def test_a_hand_over_does_not_hold_the_rebalance_for_the_worker(
    kind: EventKind, reason: str
) -> None:
    """A loss the worker hands over (planned, a lost session or a fence alike) returns from
    the barrier at once, and the partition stays active."""
    w = _Worker(handing={3})
    w.active = {3, 4}
    assert await _returns_before_the_worker_turns(w, _event(kind, 3, reason))
    w.turn()  # applied on the worker's next turn: still active, handed over
    assert w.active == {3, 4}
    assert w.unassigned == []


@pytest.mark.asyncio
@pytest.mark.parametrize(("kind", "reason"), LOSSES)
async def test_other_losses_wait_until_the_worker_let_go(kind: EventKind, reason: str) -> None:
    """A loss the worker does not hand over waits in the barrier until it let go."""
    w = _Worker(handing={3})
    w.active = {3, 4}
    assert not await _returns_before_the_worker_turns(w, _event(kind, 4, reason))
    assert w.active == {3}
    assert w.unassigned == [4]
