"""The NELI member: the facade and lifecycle around the pure :class:`LeadershipTracker`.

:class:`Neli` starts and stops a member and answers its queries; the Kafka work runs in:

* the **poll thread** (:mod:`neli._poller`), which owns the librdkafka consumer: it polls, feeds
  heartbeats to the tracker and runs the rebalance callbacks. A revocation blocks that thread
  (and so the rebalance) until the barrier handlers on the event loop have returned: the
  barrier semantics of goNELI.
* a **pulse task** publishes heartbeats every ``pulse_interval_ms``: to every partition (full
  NELI) or to the partitions this member owns (fast variant); see :mod:`neli._heartbeat_sender`.
* a **watchdog task** ticks the tracker's stall guard (:mod:`neli._stall`).
* a **check task** re-evaluates leadership every ``check_interval_ms`` and delivers
  ACQUIRED / FENCED / RESUMED events; REVOKED comes from the rebalance callbacks.

:meth:`Neli.is_leader` never reads a cached flag: it asks the tracker with the current time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, Producer

from neli._clock import SYSTEM_CLOCK, Clock
from neli._config import Mode, NeliConfig
from neli._dispatch import EventDispatcher
from neli._errors import NeliClosedError
from neli._events import BarrierHandler, LeadershipEvent
from neli._heartbeat_sender import HeartbeatSender, MetaProvider
from neli._poller import Poller
from neli._rejections import Rejections
from neli._roles import role_partition
from neli._status import NeliStatus
from neli._takeover import MemberTakeover
from neli._topic import topic_partitions
from neli._tracker import LeadershipTracker
from neli.takeover import Takeover

log = logging.getLogger("neli")

_ROLE_CACHE_SIZE = 100_000


class Neli:
    """One member of a NELI group.

    Use as an async context manager, or call :meth:`start` and :meth:`close`::

        async with Neli(NeliConfig(bootstrap_servers=..., group_id="g", topic="c")) as neli:
            if neli.is_leader("EURUSD"):
                ...

    Args:
        config: the validated configuration.
        clock: time source (tests inject a manual one).
        heartbeat_meta: called at every pulse; its mapping travels in this member's heartbeats
            (e.g. a trace context), and reaches the next leader as ``LeadershipEvent.predecessor``.
    """

    def __init__(
        self,
        config: NeliConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        heartbeat_meta: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        """Create a member; nothing connects until :meth:`start`."""
        self.config = config
        self.member_id = f"{config.member_name}/{uuid.uuid4().hex[:12]}"
        self._clock = clock
        self._meta: list[MetaProvider] = [] if heartbeat_meta is None else [heartbeat_meta]
        self._tracker = LeadershipTracker(config, self.member_id)
        self._tracker.verify_own = True  # the sender announces every heartbeat it sends
        self._lock = threading.Lock()
        self._events = EventDispatcher(config, self.member_id, clock)
        self._rejections = Rejections(config.group_id, clock.monotonic)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Producer | None = None
        self._partitions = 0
        # murmur2 in Python costs ~2 us; roles (instruments) are few and asked about constantly.
        self._role_cache: dict[str | bytes, int] = {}
        self._sender: HeartbeatSender | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._watchdog: asyncio.Task[None] | None = None
        self._ticked_by_callers = False  # closed: takeover.recovering()'s callers tick it
        self._takeover = MemberTakeover(
            self._tracker,
            self._lock,
            clock,
            pulse_now=self._pulse_now,
            closed=lambda: self._ticked_by_callers,
        )
        self._poller: Poller | None = None
        self._closed = False
        self._failure: BaseException | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Neli:
        """Start the member."""
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the member."""
        await self.close()

    async def start(self) -> None:
        """Check the topic, join the group and start heartbeating.

        Raises:
            BrokerUnavailableError: the broker did not answer within ``start_timeout_ms``.
            TopicError: the topic is missing or has an unexpected partition count.
        """
        if self._loop is not None:
            raise NeliClosedError("start() was already called")
        self._loop = asyncio.get_running_loop()
        cfg = self.config
        consumer = Consumer(cfg.consumer_settings(), logger=log)
        self._producer = Producer(cfg.producer_settings(), logger=log)
        try:
            self._partitions = await asyncio.to_thread(topic_partitions, consumer, cfg)
        except BaseException:
            consumer.close()
            raise
        self._sender = HeartbeatSender(
            config=cfg,
            member_id=self.member_id,
            tracker=self._tracker,
            lock=self._lock,
            clock=self._clock,
            producer=self._producer,
            partitions=self._partitions,
            meta=self._meta,
        )
        self._poller = Poller(
            config=cfg,
            member_id=self.member_id,
            tracker=self._tracker,
            lock=self._lock,
            clock=self._clock,
            consumer=consumer,
            loop=self._loop,
            events=self._events,
            pulse=self._sender.pulse,
            on_failure=self._on_poll_failure,
            partitions=self._partitions,
            rejections=self._rejections,
        )
        self._poller.start()
        with self._lock:
            self._tracker.tick(self._clock.monotonic(), self._clock.wall())
        for name, coro in (
            ("pulse", self._sender.run()),
            ("watchdog", self._watchdog_loop()),
            ("check", self._check_loop()),
        ):
            task = asyncio.create_task(coro, name=f"neli-{name}")
            task.add_done_callback(self._on_task_done)
            self._tasks.append(task)
            if name == "watchdog":
                self._watchdog = task

    async def close(self, *, handover: bool = True) -> None:
        """Stop leading, leave the group (REVOKED is delivered to handlers) and flush.

        Args:
            handover: in non-exclusive mode, leave the group first and keep leading the
                released partitions until they go stale (at most T), so that the members that
                take them over start before this one stops: a rolling restart leaves no
                partition without a leader. Ignored in exclusive mode, where leadership ends
                as soon as the partitions are revoked.
        """
        if self._closed or self._loop is None:
            self._closed = True
            return
        self._closed = True
        await self._settle_rebalance()
        if handover and self.config.mode is Mode.NON_EXCLUSIVE and self._failure is None:
            await self._hand_over()
        # A delivery in progress (the check loop dispatching a loss: the barrier flushing the
        # worker, then the tracing handler) must finish before its task is cancelled; cancelled
        # mid-barrier, the later handlers never saw the loss (no revoked span, no term end).
        # The watchdog goes on until the end: leaving the group and the last revocation (which
        # an application may answer with work of its own) are not a stall.
        tasks = [task for task in self._tasks if task is not self._watchdog]
        async with self._events.lock:
            for task in tasks:
                task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._poller is not None:
            self._poller.stop()
            with contextlib.suppress(Exception):
                await self._poller.done
        with self._lock:
            left = self._tracker.revoke(self._tracker.led_or_assigned(), "closed")
        await self._events.dispatch(left)
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5.0)
        self._events.close()
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        with self._lock:
            self._tracker.tick(self._clock.monotonic(), self._clock.wall())
            self._ticked_by_callers = True

    async def _settle_rebalance(self) -> None:
        """Before leaving, let a rebalance in progress finish (bounded by S + 1 s).

        A member that leaves between the revocation and the assignment of a rebalance depends
        on the coordinator to finish that round without it (Apache Kafka's does, or starts
        another); a coordinator that does not leaves the other members unassigned for good.
        Waiting for the assignment costs at most a rebalance, so the guard stays.
        """
        deadline = self._clock.monotonic() + self.config.session_timeout_ms / 1000 + 1.0
        # The flag is flipped by librdkafka's callbacks in the poll thread: polled, not awaited.
        # No poller: start() failed before polling, and the member counts as still joining.
        while (  # noqa: ASYNC110
            (self._poller is None or self._poller.rebalancing)
            and self._failure is None
            and self._clock.monotonic() < deadline
        ):
            await asyncio.sleep(0.05)

    async def _hand_over(self) -> None:
        if self._poller is not None:
            self._poller.leave()
        deadline = self._clock.monotonic() + self.config.threshold_s + 1.0
        while self._clock.monotonic() < deadline:
            with self._lock:
                if not self._tracker.led_or_assigned():
                    return
            await asyncio.sleep(self.config.check_interval_ms / 1000)

    async def wait(self) -> None:
        """Wait until the member stops; raise the failure of a background job, if any."""
        if self._poller is None:
            raise NeliClosedError("not started")
        await asyncio.shield(self._poller.done)
        if self._failure is not None:
            raise self._failure

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("neli background task %s failed", task.get_name(), exc_info=exc)
            self._failure = exc
            if self._poller is not None:
                self._poller.stop()

    def _pulse_now(self) -> None:
        """Publish heartbeats at once (from any thread), if running."""
        if self._loop is not None and self._sender is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                self._loop.call_soon_threadsafe(self._sender.pulse)

    def _on_poll_failure(self, exc: BaseException) -> None:
        """The poll thread ended on ``exc`` (called from that thread): :meth:`wait` raises it."""
        self._failure = exc

    # -- queries ------------------------------------------------------------------------------

    @property
    def heartbeat_errors(self) -> int:
        """Heartbeats that could not be queued or were not delivered (diagnostics)."""
        return 0 if self._sender is None else self._sender.errors

    @property
    def heartbeats_rejected(self) -> Mapping[str, int]:
        """Records read on the NELI topic and refused, per reason (see :class:`NeliStatus`)."""
        return self._rejections.by_reason()

    @property
    def partitions(self) -> int:
        """M, the NELI topic's partition count (known after :meth:`start`)."""
        return self._partitions

    def partition_for(self, role: str | bytes) -> int:
        """The NELI partition whose leader leads ``role``."""
        cached = self._role_cache.get(role)
        if cached is not None:
            return cached
        if not self._partitions:
            raise NeliClosedError("not started")
        if len(self._role_cache) >= _ROLE_CACHE_SIZE:
            self._role_cache.clear()
        partition = self._role_cache[role] = role_partition(role, self._partitions)
        return partition

    def is_leader(self, role: str | bytes) -> bool:
        """Whether this member leads ``role`` at this instant (``leads(partition_for(role))``).

        See :meth:`leads` for what the answer means and when it stops being true.
        """
        return self.leads(self.partition_for(role))

    def leads(self, partition: int) -> bool:
        """Whether this member leads NELI partition ``partition`` at this instant.

        ``True``: the group assigns the partition to this member and its observation of it is
        fresher than T (exclusive mode: and the grace period has passed). Ask again right
        before each action that must be led; never cache it. When the answer stops being true
        without this member noticing is stated in :mod:`neli` ("When leadership ends").
        """
        clock = self._clock
        with self._lock:
            return self._tracker.leads(partition, clock.monotonic(), clock.wall())

    def led_partitions(self) -> frozenset[int]:
        """The partitions this member leads at this instant."""
        clock = self._clock
        with self._lock:
            return self._tracker.led(clock.monotonic(), clock.wall())

    def assigned_partitions(self) -> frozenset[int]:
        """The partitions the group currently assigns to this member."""
        with self._lock:
            return self._tracker.assigned()

    @property
    def takeover(self) -> Takeover:
        """The hand-over and early-grace hooks (:mod:`neli.takeover`), for an application that
        moves state with a partition; a plain user needs only :meth:`leads` and the events."""
        return self._takeover

    def status(self) -> NeliStatus:
        """A snapshot for status displays: assignment, leadership, freshness and reasons."""
        clock = self._clock
        with self._lock:
            return NeliStatus.of(
                self._tracker,
                group=self.config.group_id,
                member_id=self.member_id,
                member_name=self.config.member_name,
                partitions=self._partitions,
                now_mono=clock.monotonic(),
                now_wall=clock.wall(),
                rejected_heartbeats=self._rejections.total,
            )

    # -- events -------------------------------------------------------------------------------

    def add_heartbeat_meta(self, provider: MetaProvider) -> None:
        """Add a heartbeat meta provider, like the ``heartbeat_meta`` argument.

        Every provider is called at each pulse and their mappings are merged (later providers
        win on a clashing key).
        """
        self._meta.append(provider)

    def add_barrier(self, handler: BarrierHandler) -> Callable[[], None]:
        """Register a barrier handler (see :mod:`neli._events`); returns a remover."""
        return self._events.add_barrier(handler)

    def events(self) -> AsyncIterator[LeadershipEvent]:
        """Yield every leadership event from now on, until the member closes."""
        return self._events.events()

    # -- background jobs ----------------------------------------------------------------------

    async def _watchdog_loop(self) -> None:
        interval = self.config.check_interval_ms / 1000
        while True:
            with self._lock:
                self._tracker.tick(self._clock.monotonic(), self._clock.wall())
            await asyncio.sleep(interval)

    async def _check_loop(self) -> None:
        interval = self.config.check_interval_ms / 1000
        clock = self._clock
        while True:
            async with self._events.lock:
                with self._lock:
                    transitions = self._tracker.evaluate(clock.monotonic(), clock.wall())
                await self._events.dispatch(transitions)
            await asyncio.sleep(interval)
