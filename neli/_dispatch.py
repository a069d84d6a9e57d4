"""Delivering leadership events: barrier handlers in order, then event-stream subscribers.

The runtime turns the tracker's transitions into :class:`~neli._events.LeadershipEvent` here.
Delivery is serialised by :attr:`EventDispatcher.lock` (the periodic check and the rebalance
callbacks both deliver), so handlers see each partition's events in the order they happened.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable

from neli._clock import Clock
from neli._config import NeliConfig
from neli._events import BarrierHandler, LeadershipEvent
from neli._tracker import Transition

log = logging.getLogger("neli")


class EventBus:
    """Barrier handlers and event-stream subscribers, delivered to in that order.

    Shared by the real member (:class:`EventDispatcher`) and :class:`neli.testing.FakeNeli`.
    """

    def __init__(self) -> None:
        """Create a bus with no handlers and no subscribers."""
        self._barriers: list[BarrierHandler] = []
        self._subscribers: list[asyncio.Queue[LeadershipEvent | None]] = []

    def add_barrier(self, handler: BarrierHandler) -> Callable[[], None]:
        """Register a barrier handler; returns a remover."""
        self._barriers.append(handler)
        return lambda: self._barriers.remove(handler)

    async def events(self) -> AsyncIterator[LeadershipEvent]:
        """Yield every event from now on, until :meth:`close`."""
        queue: asyncio.Queue[LeadershipEvent | None] = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            self._subscribers.remove(queue)

    def close(self) -> None:
        """End every event stream."""
        for queue in self._subscribers:
            queue.put_nowait(None)

    async def deliver(self, event: LeadershipEvent, *, contain_errors: bool = True) -> None:
        """Run every barrier handler on ``event`` (awaiting each), then queue it to streams.

        Args:
            event: the event.
            contain_errors: log a failing handler and go on (a live member must keep going);
                ``False`` lets the error propagate (a fake in a user's unit test).
        """
        for handler in list(self._barriers):
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                if not contain_errors:
                    raise
                log.exception("neli barrier handler failed on %s", event)
        for queue in self._subscribers:
            queue.put_nowait(event)


class EventDispatcher(EventBus):
    """Turns one member's tracker transitions into events and delivers them."""

    def __init__(self, config: NeliConfig, member_id: str, clock: Clock) -> None:
        """Create an empty dispatcher for ``member_id``."""
        super().__init__()
        self._config = config
        self._member_id = member_id
        self._clock = clock
        #: Held while events are delivered, so deliveries never interleave.
        self.lock = asyncio.Lock()

    async def dispatch_locked(self, transitions: list[Transition]) -> None:
        """:meth:`dispatch` under :attr:`lock`."""
        async with self.lock:
            await self.dispatch(transitions)

    async def dispatch(self, transitions: list[Transition]) -> None:
        """Deliver ``transitions`` (the caller holds :attr:`lock` when it must)."""
        clock, cfg = self._clock, self._config
        for tr in transitions:
            pred = tr.predecessor
            event = LeadershipEvent(
                kind=tr.kind,
                partition=tr.partition,
                group=cfg.group_id,
                member_id=self._member_id,
                member_name=cfg.member_name,
                reason=tr.reason,
                at_mono=clock.monotonic(),
                at_wall=clock.wall(),
                term_started_wall=tr.term_started_wall,
                predecessor=None
                if pred is None
                else {"member_id": pred.member_id, "member_name": pred.member_name}
                | {str(k): str(v) for k, v in pred.meta.items()},
            )
            log.info("neli %s %s %d: %s", cfg.group_id, tr.kind.value, tr.partition, tr.reason)
            await self.deliver(event)
