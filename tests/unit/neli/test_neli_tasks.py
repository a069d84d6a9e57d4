"""LeaderTasks driven by FakeNeli: one task per led partition, stopped before a loss completes."""

from __future__ import annotations

import asyncio

import pytest

from neli import LeaderTasks
from neli.testing import FakeNeli


class Recorder:
    """A task factory whose tasks run until cancelled and record their start and cleanup."""

    def __init__(self) -> None:
        """Nothing started yet."""
        self.started: list[int] = []
        self.cleaned: list[int] = []

    async def __call__(self, partition: int) -> None:
        """Run until cancelled; clean up asynchronously, as real work would."""
        self.started.append(partition)
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits (a flush, say)
            await asyncio.sleep(0)
            self.cleaned.append(partition)


async def _settle() -> None:
    """Let newly created tasks run to their first await."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_task_started_on_acquire() -> None:
    """Acquiring a partition starts the factory's task for it."""
    fake, rec = FakeNeli(partitions=4), Recorder()
    tasks = LeaderTasks(fake, rec)
    await fake.acquire(1, 3)
    await _settle()
    assert rec.started == [1, 3]
    assert tasks.running == frozenset({1, 3})
    await tasks.close()


@pytest.mark.parametrize("loss", ["revoke", "fence"])
async def test_loss_returns_only_after_the_task_cleaned_up(loss: str) -> None:
    """revoke()/fence() return only once the partition's task has run its finally block."""
    fake, rec = FakeNeli(partitions=4), Recorder()
    tasks = LeaderTasks(fake, rec)
    await fake.acquire(0, 2)
    await _settle()
    await getattr(fake, loss)(2)
    assert rec.cleaned == [2]
    assert tasks.running == frozenset({0})
    await tasks.close()


async def test_resume_restarts_the_task() -> None:
    """A fenced partition's task is stopped, and a new one starts when leadership resumes."""
    fake, rec = FakeNeli(partitions=2), Recorder()
    tasks = LeaderTasks(fake, rec)
    await fake.acquire(1)
    await _settle()
    await fake.fence(1)
    assert tasks.running == frozenset()
    await fake.resume(1)
    await _settle()
    assert rec.started == [1, 1]
    assert rec.cleaned == [1]
    assert tasks.running == frozenset({1})
    await tasks.close()


async def test_failures_are_recorded_and_not_restarted() -> None:
    """A task that raises is kept in .failures with its partition and is not restarted."""
    fake = FakeNeli(partitions=2)
    boom = RuntimeError("boom")
    calls: list[int] = []

    async def fail(partition: int) -> None:
        calls.append(partition)
        raise boom

    tasks = LeaderTasks(fake, fail)
    await fake.acquire(1)
    await _settle()
    assert tasks.failures == [(1, boom)]
    assert tasks.running == frozenset()
    assert calls == [1]
    await tasks.close()


async def test_a_task_that_returns_is_neither_a_failure_nor_restarted() -> None:
    """A task that simply finishes leaves no failure and is not started again."""
    fake = FakeNeli(partitions=1)
    calls: list[int] = []

    async def once(partition: int) -> None:
        calls.append(partition)

    tasks = LeaderTasks(fake, once)
    await fake.acquire(0)
    await _settle()
    assert calls == [0]
    assert tasks.failures == []
    assert tasks.running == frozenset()
    await tasks.close()


async def test_close_stops_every_task_and_detaches() -> None:
    """close() stops all tasks, waiting for their cleanup, and later events start nothing."""
    fake, rec = FakeNeli(partitions=4), Recorder()
    tasks = LeaderTasks(fake, rec)
    await fake.acquire(0, 1, 2)
    await _settle()
    await tasks.close()
    assert sorted(rec.cleaned) == [0, 1, 2]
    assert tasks.running == frozenset()
    await fake.acquire(3)
    await _settle()
    assert rec.started == [0, 1, 2]


async def test_cancelling_a_loss_during_task_cleanup_propagates() -> None:
    """Cancelling the coroutine delivering a loss while it waits for the task is not swallowed."""
    fake = FakeNeli(partitions=1)
    release = asyncio.Event()
    running = asyncio.Event()

    async def slow_cleanup(partition: int) -> None:
        running.set()
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()

    tasks = LeaderTasks(fake, slow_cleanup)
    await fake.acquire(0)
    await running.wait()
    revoker = asyncio.create_task(fake.revoke(0))
    await _settle()  # the revoke is now waiting for the task's cleanup
    assert not revoker.done()
    revoker.cancel()
    done, _ = await asyncio.wait({revoker}, timeout=1.0)
    release.set()
    await tasks.close()
    assert revoker in done
    assert revoker.cancelled(), "LeaderTasks swallowed the cancellation of the revoking task"
