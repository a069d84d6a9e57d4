"""A member joins its NELI group only once its worker no longer holds the join back."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest
from confluent_kafka import Consumer, Message

from pricing_ha.member import runner
from pricing_ha.member.runner import WorkerMember
from pricing_ha.member.worker import PartitionWorker

if TYPE_CHECKING:
    from neli import Neli


class _Worker(PartitionWorker):
    """A worker without a thread whose join is held back while :attr:`held` is set."""

    held: str | None = "the standby tail of prices is catching up on partitions [0, 1]"

    def start(self) -> None:
        """No thread: nothing to run."""

    def stop(self) -> None:
        """Nothing to stop."""

    def assign(self, partition: int) -> None:
        """Nothing to assign."""

    def unassign(self, partition: int) -> None:
        """Nothing to unassign."""

    def process(self, batch: list[Message]) -> None:
        """Nothing to process."""

    def join_held(self) -> str | None:
        """The scripted reason."""
        return self.held


def _member(worker: _Worker) -> tuple[WorkerMember, list[str | None]]:
    """A member around ``worker`` whose fake NELI records what the worker said at its start."""
    joined: list[str | None] = []

    async def start() -> None:
        joined.append(worker.join_held())

    neli = SimpleNamespace(add_barrier=lambda _h: None, start=start)
    return WorkerMember(cast("Neli", neli), worker), joined


async def test_the_member_joins_once_its_worker_is_ready() -> None:
    worker = _Worker("w", cast("Consumer", None), lambda _p: True)
    member, joined = _member(worker)
    starting = asyncio.create_task(member.start())
    await asyncio.sleep(0.3)
    assert joined == []  # still held back
    with pytest.raises(RuntimeError, match="not joined its group yet: the standby tail"):
        member.readiness()
    worker.held = None
    await asyncio.wait_for(starting, 2.0)
    assert joined == [None]  # joined only once nothing held it back
    assert member.readiness()


async def test_the_member_joins_anyway_after_the_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(runner, "_JOIN_WAIT_S", 0.2)
    worker = _Worker("w", cast("Consumer", None), lambda _p: True)
    member, joined = _member(worker)
    await asyncio.wait_for(member.start(), 2.0)
    assert joined == [worker.held]  # joined while still held: it defers takeovers instead
    assert "still not ready" in caplog.text
