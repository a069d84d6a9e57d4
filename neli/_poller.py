"""The poll thread: one member's consumer, the heartbeats it reads and the rebalances it runs.

librdkafka's consumer blocks, so one thread owns it from subscription to close. It polls the
NELI topic and feeds every heartbeat it reads to the tracker (fast exclusive: storing the
offset *of* the member's own heartbeats, so that the next holder reads them first), and it runs
the group's rebalance callbacks. Any record that is not an acceptable heartbeat (malformed,
oversized, timestamped too far in the future, or refused by the tracker) is dropped and counted
in :class:`~neli._rejections.Rejections`, never raised: anyone who may write the topic could
otherwise stop every member that reads it, one after the other. After each poll the tracker
learns when it began (rebalance callbacks queued before then have run: see
:meth:`LeadershipTracker.polled`).

* an **assignment** goes to the tracker, and a pulse follows at once (the fast variant leads a
  new partition only on its own heartbeat there);
* a **revocation** goes to the tracker, and its REVOKED events are delivered on the event loop
  while this thread, and so the rebalance, waits for the barrier handlers to return (bounded
  by ``barrier_timeout_ms``): the barrier semantics of goNELI;
* a **lost session** is revoked the same way, but the thread does not wait: the group has
  already moved on without this member.

Leaving the group happens here too: :meth:`Poller.leave` unsubscribes (non-exclusive hand-over:
the released partitions stay led until stale), and the thread closes the consumer when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaException,
    Message,
    TopicPartition,
)

from neli._clock import Clock
from neli._config import NeliConfig
from neli._dispatch import EventDispatcher
from neli._heartbeat import Heartbeat, HeartbeatDecodeError
from neli._rejections import Rejections
from neli._tracker import LeadershipTracker

log = logging.getLogger("neli")

_POLL_TIMEOUT_S = 0.05


def _log_dispatch_failure(future: Future[None]) -> None:
    """Log a revocation dispatch that nobody waits for, if it failed."""
    if not future.cancelled() and future.exception() is not None:
        log.error("neli revocation dispatch failed", exc_info=future.exception())


class Poller:
    """Owns one member's consumer in a thread of its own, from subscription to close.

    Args:
        config: the member's configuration.
        member_id: the member's unique id.
        tracker: the member's tracker (fed heartbeats, assignments and revocations).
        lock: the lock guarding ``tracker``.
        clock: the member's clock.
        consumer: the member's consumer, not yet subscribed; the thread closes it when it ends.
        loop: the event loop the member runs on: events are delivered and pulses sent there.
        events: delivers the REVOKED events of a revocation.
        pulse: sends one heartbeat now (called on ``loop``).
        on_failure: called from the thread with the error that ended it, before :attr:`done`.
        partitions: M, the topic's partition count (heartbeats naming others are refused).
        rejections: where refused records are counted.
    """

    def __init__(
        self,
        *,
        config: NeliConfig,
        member_id: str,
        tracker: LeadershipTracker,
        lock: threading.Lock,
        clock: Clock,
        consumer: Consumer,
        loop: asyncio.AbstractEventLoop,
        events: EventDispatcher,
        pulse: Callable[[], None],
        on_failure: Callable[[BaseException], None],
        partitions: int,
        rejections: Rejections,
    ) -> None:
        """Create a poller; nothing is polled until :meth:`start`."""
        self._config = config
        self._member_id = member_id
        self._tracker = tracker
        self._lock = lock
        self._clock = clock
        self._consumer = consumer
        self._loop = loop
        self._events = events
        self._pulse = pulse
        self._on_failure = on_failure
        self._partitions = partitions
        self._rejections = rejections
        self._store_own = config.stores_own_heartbeats
        self._stopping = threading.Event()
        self._leave = threading.Event()
        self._done: asyncio.Future[None] = loop.create_future()
        #: From joining until the first assignment, and from a revocation to the assignment
        #: that follows it (flipped in the poll thread by librdkafka's callbacks).
        self.rebalancing = True

    @property
    def done(self) -> asyncio.Future[None]:
        """Resolved (with ``None``, on the loop) once the thread has closed the consumer."""
        return self._done

    def start(self) -> None:
        """Subscribe to the NELI topic and start the poll thread."""
        cfg = self._config
        self._consumer.subscribe(
            [cfg.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        threading.Thread(target=self._run, name=f"neli-poll-{cfg.group_id}", daemon=True).start()

    def leave(self) -> None:
        """Leave the group at the next poll (a revocation with release), but go on polling."""
        self._leave.set()

    def stop(self) -> None:
        """End the thread: it closes the consumer (the last revocation runs the barrier)."""
        self._stopping.set()

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        consumer, loop = self._consumer, self._loop
        error: BaseException | None = None
        try:
            left = False
            while not self._stopping.is_set():
                if self._leave.is_set() and not left:
                    consumer.unsubscribe()  # revocation with release: leading until stale
                    left = True
                started = self._clock.monotonic()
                msg = consumer.poll(_POLL_TIMEOUT_S)
                if msg is not None:
                    err = msg.error()
                    if err is None:
                        self._on_record(msg)
                    elif err.fatal():
                        raise KafkaException(err)
                    else:
                        log.warning("neli consumer: %s", err)
                self._polled(started)
        except BaseException as exc:  # noqa: BLE001 - handed to wait() instead of lost in a thread
            error = exc
        finally:
            try:
                consumer.close()  # leaves the group; revocation runs the barrier
            except Exception:
                log.exception("neli consumer close failed")
        if error is not None:
            self._on_failure(error)
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(self._finish)

    def _finish(self) -> None:
        if not self._done.done():
            self._done.set_result(None)

    def _on_record(self, msg: Message) -> None:
        partition = msg.partition()
        if partition is None:
            return
        not_after = self._clock.wall() + self._config.max_future_s
        ts_type, ts_ms = msg.timestamp()
        publish = None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts_ms / 1000.0
        try:
            hb = Heartbeat.decode(
                msg.value(), not_after_wall=not_after, partitions=self._partitions
            )
            if publish is not None and publish > not_after:
                raise HeartbeatDecodeError("future timestamp", f"{publish} is after {not_after}")
        except HeartbeatDecodeError as exc:
            self._refuse(msg, partition, exc.reason, str(exc))
            return
        with self._lock:
            refused = self._tracker.observe(partition, hb, publish, self._clock.monotonic())
        if refused is not None:
            self._refuse(msg, partition, refused, f"from {hb.member_id!r}"[:200])
        elif self._store_own and hb.member_id == self._member_id:
            self._store(msg, partition)

    def _refuse(self, msg: Message, partition: int, reason: str, detail: str) -> None:
        self._rejections.refuse(reason, f"{msg.topic()}[{partition}]@{msg.offset()}", detail)

    def _polled(self, started: float) -> None:
        with self._lock:
            disproved = self._tracker.polled(started)
        for partition, claimant in disproved:
            where = f"{self._config.topic}[{partition}]"
            detail = (
                f"take-over by {claimant!r}"[:200] + " disproved: still assigned; leading again"
            )
            self._rejections.refuse("disproved take-over", where, detail)

    def _store(self, msg: Message, partition: int) -> None:
        """Fast exclusive: store the offset *of* our own heartbeat for the auto-commit (not
        the next one), so that whoever holds the partition next reads it first."""
        offset = msg.offset()
        if offset is None or offset < 0:
            return
        try:
            self._consumer.store_offsets(
                offsets=[TopicPartition(self._config.topic, partition, offset)]
            )
        except KafkaException as exc:  # revoked meanwhile: nothing to commit there
            log.debug("neli: offset of partition %d not stored: %s", partition, exc)

    # -- rebalance callbacks (in the thread, from inside consumer.poll or consumer.close) -----

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalancing = False
        given = sorted(tp.partition for tp in partitions if tp.topic == self._config.topic)
        if given:
            log.info("neli %s assigned %s", self._config.group_id, given)
        with self._lock:
            self._tracker.assign(
                given,
                self._clock.monotonic(),
                self._clock.wall(),
            )
        if partitions:
            # A new assignment needs this member's own heartbeat (fast variant): send it now.
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                self._loop.call_soon_threadsafe(self._pulse)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalancing = True
        self._revoke(partitions, "rebalance")

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._revoke(partitions, "session lost", lost=True)

    def _revoke(self, partitions: list[TopicPartition], reason: str, *, lost: bool = False) -> None:
        with self._lock:
            transitions = self._tracker.revoke(
                [tp.partition for tp in partitions if tp.topic == self._config.topic],
                reason,
                release=not self._stopping.is_set(),
                lost=lost,
            )
        if not transitions:
            return
        future = asyncio.run_coroutine_threadsafe(
            self._events.dispatch_locked(transitions), self._loop
        )
        if lost:
            # The group has already moved on without this member: waiting for the barrier
            # protects nothing (leads() is already False, and whoever is assigned next waits
            # out its grace period) and only delays the rejoin. After a broker stall, with
            # FENCED events still flushing a stalled producer ahead of these, waiting cost the
            # relays 1-2 s and a second rebalance (the fault drill).
            future.add_done_callback(_log_dispatch_failure)
            return
        try:
            # Blocking here blocks the rebalance: in-flight work finishes first (barrier).
            future.result(timeout=self._config.barrier_timeout_ms / 1000)
        except FutureTimeoutError:
            timeout = self._config.barrier_timeout_ms
            log.warning("neli barrier handlers did not finish in %d ms", timeout)
        except Exception:
            log.exception("neli revocation dispatch failed")
