"""Run a task for every partition this member leads (goNELI's background task, per partition).

:class:`LeaderTasks` registers itself as a barrier handler: when leadership of a partition is
gained it starts ``factory(partition)``; when it is lost it cancels that task and waits for it,
so a REVOKED event (and the rebalance behind it) completes only after the task has stopped.
A task should still check :meth:`Neli.leads` at the moment it acts: a FENCED event arrives a
check interval after the fact.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from neli._events import BarrierHandler, EventKind, LeadershipEvent

log = logging.getLogger("neli")

TaskFactory = Callable[[int], Coroutine[Any, Any, None]]


class _Barriers(Protocol):
    def add_barrier(self, handler: BarrierHandler) -> Callable[[], None]: ...


class LeaderTasks:
    """Keeps one task running per led partition.

    Args:
        neli: the member (anything with ``add_barrier``, including :class:`neli.testing.FakeNeli`).
        factory: makes the coroutine to run while ``partition`` is led. If it returns or fails
            while still leading, it is not restarted until leadership is lost and regained;
            failures are logged and kept in :attr:`failures`.
    """

    def __init__(self, neli: _Barriers, factory: TaskFactory) -> None:
        """Attach to ``neli``."""
        self._factory = factory
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self.failures: list[tuple[int, BaseException]] = []
        self._remove = neli.add_barrier(self._on_event)

    @property
    def running(self) -> frozenset[int]:
        """Partitions whose task is still running."""
        return frozenset(p for p, t in self._tasks.items() if not t.done())

    async def _on_event(self, event: LeadershipEvent) -> None:
        if event.kind.gains:
            await self._stop(event.partition)
            task = asyncio.create_task(
                self._factory(event.partition), name=f"neli-leader-task-{event.partition}"
            )
            task.add_done_callback(functools.partial(self._done, event.partition))
            self._tasks[event.partition] = task
        elif event.kind in (EventKind.REVOKED, EventKind.FENCED):
            await self._stop(event.partition)

    def _done(self, partition: int, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("leader task for partition %d failed", partition, exc_info=exc)
            self.failures.append((partition, exc))

    async def _stop(self, partition: int) -> None:
        task = self._tasks.pop(partition, None)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError  # we were cancelled too: never swallow that

    async def close(self) -> None:
        """Detach from the member and stop every task."""
        self._remove()
        for partition in list(self._tasks):
            await self._stop(partition)
