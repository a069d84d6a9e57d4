"""A worker thread that does the Kafka work for the NELI partitions its process leads.

Publishers and relays share this shape: NELI decides which partitions the process leads; for
each led partition one consumer (assigned by hand) reads the partition's input and the worker
produces output, then commits. Everything Kafka happens in this one thread, so the consumer is
never used concurrently. Leadership changes arrive as commands from the event loop:

* gain  -> ``assign(k)``: the subclass rebuilds what it needs and starts consuming k;
* loss  -> ``unassign(k)``: applied between batches, so in-flight work is flushed and committed
  first; the event-loop side awaits the returned event, which is what makes NELI's barrier
  hold a revocation until then (:meth:`barrier_handler`).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message, TopicPartition

from neli import EventKind, LeadershipEvent
from pricing_ha.errors import PricingError
from pricing_ha.kafka.positions import coordinator_trouble, restart_unstarted
from pricing_ha.member.commits import Commits

log = logging.getLogger("pricing_ha.worker")

BATCH = 500
FIRST_WAIT_S = 0.02
FLUSH_TIMEOUT_S = 30.0
# A hand-over is accepted only while the rebalance still waits for it: well inside NELI's
# barrier timeout (30 s by default), after which the group moves on without this member.
HANDOVER_ACCEPT_S = 10.0
# How long a worker asks for its group's committed offsets (pricing_ha.kafka.positions), and
# how soon it asks again when the coordinator did not answer.
COMMITTED_TIMEOUT_S = 2.0
HEAL_RETRY_S = 0.5
# A restart of unstarted partitions asks for committed offsets on the worker thread, which
# then works no other partition: each try waits at most HEAL_TIMEOUT_S (an answering
# coordinator takes milliseconds), and while the coordinator stays silent the tries back off,
# doubling from HEAL_RETRY_S up to HEAL_MAX_S. (Retried every 0.5 s with a 2 s wait, a
# publisher whose quote consumer had lost its coordinator for 20 s after a broker stall spent
# 80 % of that time waiting.)
HEAL_TIMEOUT_S = 0.5
HEAL_MAX_S = 5.0


class TakeoverDeferredError(PricingError):
    """Raised by :meth:`PartitionWorker.assign`: the partition cannot be taken up now.

    The worker keeps the partition wanted but not active, reports it as not ready, and tries
    again after ``retry_after_s`` while NELI still says it leads it. A ``routine`` deferral is
    a step of a normal move (the relay's successor waiting on the owner it asked): logged at
    INFO, where any other is a WARNING.
    """

    def __init__(self, reason: str, retry_after_s: float = 1.0, *, routine: bool = False) -> None:
        """Record why, and when to try again."""
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.routine = routine


@dataclass
class _Command:
    op: str  # "assign" | "unassign" | "handover"
    partition: int
    done: threading.Event = field(default_factory=threading.Event)
    # Looked up when called, not bound here: the relay simulation replaces this module's
    # ``time`` (bound at import, a command's age mixed real and simulated clocks, and whether
    # a hand-over was accepted depended on the machine's uptime).
    created: float = field(default_factory=lambda: time.monotonic())  # noqa: PLW0108 (above)


class PartitionWorker(abc.ABC):
    """Base class: command queue, the thread, failure reporting."""

    def __init__(self, name: str, consumer: Consumer, leads: Callable[[int], bool]) -> None:
        """Create the worker around ``consumer`` (the input consumer, assigned by hand).

        Args:
            name: the thread's name.
            consumer: the input consumer.
            leads: NELI's "do I lead partition k now?", asked before work is resumed.
        """
        self.consumer = consumer
        # When to restart partitions a coordinator error may have left unstarted (see
        # pricing_ha.kafka.positions), or None.
        self._heal_at: float | None = None
        self._heal_backoff_s = HEAL_RETRY_S
        self.leads = leads
        self.active: set[int] = set()
        # Partitions NELI gave us (last command was a gain). A partition can leave `active`
        # without a NELI event (leadership checked false at produce time, or output failed);
        # it is taken up again as soon as NELI says we lead it.
        self.wanted: set[int] = set()
        #: Partitions whose takeover was deferred: why (read by readiness from other threads).
        self.deferred: dict[int, str] = {}
        self._retry_at: dict[int, float] = {}
        self.error: BaseException | None = None
        self.on_failure: Callable[[], object] = lambda: None
        self._commands: queue.SimpleQueue[_Command] = queue.SimpleQueue()
        self._commits = Commits()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # -- to implement -------------------------------------------------------------------------

    @abc.abstractmethod
    def assign(self, partition: int) -> None:
        """Start working on ``partition`` (add it to the consumer's assignment).

        Raises:
            TakeoverDeferredError: it cannot be taken up now; it is tried again later.
        """

    def assign_many(self, partitions: list[int]) -> dict[int, TakeoverDeferredError]:
        """Take up several partitions at once; returns the deferred ones with why.

        The default takes them one after another; a subclass whose takeover waits on I/O
        (the relay's rebuild) overrides it to take them in parallel.
        """
        deferred: dict[int, TakeoverDeferredError] = {}
        for partition in partitions:
            try:
                self.assign(partition)
            except TakeoverDeferredError as exc:
                deferred[partition] = exc
        return deferred

    @abc.abstractmethod
    def unassign(self, partition: int) -> None:
        """Stop working on ``partition`` (its in-flight output is already flushed)."""

    @abc.abstractmethod
    def process(self, batch: list[Message]) -> None:
        """Handle one batch of input, flush its output and commit its input positions."""

    def idle(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Called when a poll returned nothing (e.g. to expire time-based state)."""

    def reading(self) -> bool:
        """Whether the consumer has anything to poll: a partition being worked on (a subclass
        may also read partitions ahead of taking them up)."""
        return bool(self.active)

    def close_clients(self) -> None:
        """Flush and close the clients at the end of the thread."""
        self.consumer.close()

    def output_problem(self) -> str | None:
        """Why this worker's output cannot be delivered now, or ``None`` (a readiness detail).

        Read from other threads (the readiness check); a subclass answers from state its
        worker thread keeps, e.g. :attr:`pricing_ha.kafka.producers.ReplaceableProducer.problem`.
        """
        return None

    def join_held(self) -> str | None:
        """Why this member should not join its NELI group yet, or ``None`` (default: join).

        Read from the event loop while the member starts; the relay waits until its standby
        tail has caught up, so that the rebalance its join causes moves partitions it can
        take up at once.
        """
        return None

    def standby_problem(self) -> str | None:
        """Why this worker could not take a partition up quickly now, or ``None`` (readiness).

        Read from other threads; the relay answers whether its standby tail is caught up.
        """
        return None

    def hand_over(self, partition: int) -> bool:
        """An active partition revoked (planned or not) or fenced: keep working on it for now?

        The default is no (the partition is unassigned at once, inside the barrier). A
        subclass that returns True keeps ``partition`` active and must itself :meth:`drop` it
        when its successor is ready or its own bound has passed.
        """
        return False

    def will_hand_over(self, partition: int) -> bool:
        """Whether losing ``partition`` will be a hand-over (read from the
        event loop's thread, so answered from state that is safe to read there).

        If so, the barrier does not wait for the worker to apply it (:meth:`barrier_handler`).
        The default is no. A subclass answering yes must not do anything on ``partition``
        that needs leadership between the revocation and the hand-over being applied.
        """
        return False

    def tend(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Called on every turn of the worker loop, between batches (keep it cheap)."""

    def may_resume(self) -> bool:
        """Whether partitions this worker dropped may be taken up again now (default: yes).

        A subclass returns False while taking a partition up again would be wasted or wrong,
        e.g. while the broker its replaced producer writes to has not answered yet.
        """
        return True

    # -- commits ------------------------------------------------------------------------------

    def starting(self, partitions: list[int], *, unknown: bool = False) -> None:
        """``partitions`` were just added to the consumer's assignment: hold commits until
        each has delivered a record, or for :data:`~.commits.START_HOLD_S` (see there).

        ``unknown``: some were assigned without a known start, left to librdkafka's own look-up
        of the committed offset (:func:`pricing_ha.kafka.positions.any_unknown`): unstarted
        partitions are restarted at their committed offsets :data:`HEAL_RETRY_S` later, and
        again, backing off up to :data:`HEAL_MAX_S`, until every committed offset is known.
        """
        now = time.monotonic()
        self._commits.start(partitions, now)
        if unknown:
            self.heal_at(now + HEAL_RETRY_S)

    def heal_at(self, when: float) -> None:
        """Restart the partitions that have not started at ``when`` (monotonic), or sooner if
        a restart was already due."""
        self._heal_at = when if self._heal_at is None else min(self._heal_at, when)

    def commit_async(self, offsets: list[TopicPartition], *, now: bool = False) -> None:
        """Commit ``offsets`` asynchronously when the commit rules allow (:mod:`.commits`: held
        while a partition starts, at most every :data:`~.commits.COMMIT_EVERY_S`); ``now`` (a
        revocation's barrier, a close) commits at once, together with everything held."""
        self._send(self._commits.due(offsets, now=now))

    def no_input(self) -> None:
        """A turn of the loop that read nothing: idle work, then commits."""
        self.idle()
        self._send(self._commits.idle())

    def _send(self, commits: list[TopicPartition]) -> None:
        if commits:
            self.consumer.commit(offsets=commits, asynchronous=True)

    def note_read(self, batch: list[Message]) -> None:
        """The worker loop read ``batch``: its partitions have started (see :meth:`starting`)."""
        if self._commits.starting:
            self._commits.read(batch)

    # -- machinery ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def request(self, op: str, partition: int) -> threading.Event:
        """Queue an assign/unassign; the event is set once it has been applied."""
        cmd = _Command(op, partition)
        self._commands.put(cmd)
        return cmd.done

    def commands_pending(self) -> bool:
        """Whether assign/unassign/hand-over commands wait for the worker thread."""
        return not self._commands.empty()

    def stop(self) -> None:
        """Stop the thread after its current batch, then flush and close."""
        self._stop.set()
        self._thread.join(timeout=FLUSH_TIMEOUT_S + 5)

    async def barrier_handler(self, event: LeadershipEvent) -> None:
        """A NELI barrier handler: gains assign; losses go to :meth:`hand_over` (and, unless it
        hands the partition over, wait until the worker has let go)."""
        if event.kind.gains:
            self.request("assign", event.partition)
        elif event.kind in (EventKind.REVOKED, EventKind.FENCED):
            # Planned (a rebalance) or not (fenced, session lost): the worker decides
            # (hand_over) whether to let go now or hand over. A worker that hands over keeps
            # its output safe by a rule of its own that does not rest on NELI's leadership
            # (the relay's: its successor's request, read on the output itself), so it may
            # also ride through a lost session or a fence: a stall of the broker or of the
            # group coordinator then does not silence it until the group has re-formed.
            done = self.request("handover", event.partition)
            if self.will_hand_over(event.partition):
                # Nothing to flush first: the partition keeps being worked on until its
                # successor is ready. Waiting here for the worker's next turn, once per
                # revoked partition, held a relay's rejoin back 1.7 s for 8 partitions in the
                # fault drill, and with it the successor.
                return
            await asyncio.to_thread(done.wait, FLUSH_TIMEOUT_S)

    def _heal(self) -> None:
        """Restart unstarted partitions (:func:`restart_unstarted`); try again, backing off,
        while a committed offset is still unknown."""
        if restart_unstarted(self.consumer, HEAL_TIMEOUT_S):
            self._heal_at = None
            self._heal_backoff_s = HEAL_RETRY_S
            return
        self._heal_at = time.monotonic() + self._heal_backoff_s
        self._heal_backoff_s = min(HEAL_MAX_S, 2 * self._heal_backoff_s)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._apply_commands()
                self._reconcile()
                if self._heal_at is not None and time.monotonic() >= self._heal_at:
                    self._heal()
                self.tend()
                if not self.reading():
                    time.sleep(FIRST_WAIT_S)
                    continue
                first = self.consumer.poll(FIRST_WAIT_S)
                if first is None:
                    self.no_input()
                    continue
                batch = [first, *self.consumer.consume(BATCH - 1, 0)]
                if coordinator_trouble(batch):
                    self.heal_at(time.monotonic())
                self.note_read(batch)
                self.process(batch)
        except BaseException as exc:
            self.error = exc
            log.exception("%s failed", self._thread.name)
            self.on_failure()
        finally:
            self._apply_commands()
            self.close_clients()

    def _apply_commands(self) -> None:
        gained: list[_Command] = []
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if cmd.op == "assign":
                self.wanted.add(cmd.partition)
                self._retry_at.pop(cmd.partition, None)
                gained.append(cmd)
                continue
            self._take_up([c.partition for c in gained])  # keep the commands' order
            for c in gained:
                c.done.set()
            gained = []
            self.wanted.discard(cmd.partition)
            self.deferred.pop(cmd.partition, None)
            in_time = time.monotonic() - cmd.created < HANDOVER_ACCEPT_S
            if cmd.partition in self.active and not (
                cmd.op == "handover" and in_time and self.hand_over(cmd.partition)
            ):
                self.unassign(cmd.partition)
                self._leave(cmd.partition)
            cmd.done.set()
        self._take_up([c.partition for c in gained])
        for c in gained:
            c.done.set()

    def _take_up(self, partitions: list[int]) -> None:
        """Assign those of ``partitions`` not active yet (in parallel where the subclass can)."""
        todo = [p for p in dict.fromkeys(partitions) if p not in self.active]
        if not todo:
            return
        deferred = self.assign_many(todo)
        now = time.monotonic()
        for partition in todo:
            exc = deferred.get(partition)
            if exc is None:
                self.active.add(partition)
                self.deferred.pop(partition, None)
                self._retry_at.pop(partition, None)
            else:
                if partition not in self.deferred:
                    say = log.info if exc.routine else log.warning
                    say("taking partition %d deferred: %s", partition, exc.reason)
                self.deferred[partition] = exc.reason
                self._retry_at[partition] = now + exc.retry_after_s

    def drop(self, partition: int) -> None:
        """Stop working on ``partition`` now; :meth:`_reconcile` resumes it when still led."""
        if partition in self.active:
            self.unassign(partition)
            self._leave(partition)

    def _leave(self, partition: int) -> None:
        """``partition`` is no longer worked on: what was committed for it is forgotten (taken
        up again later, it must not be committed again from before)."""
        self.active.discard(partition)
        self._commits.forget(partition)

    def _reconcile(self) -> None:
        if self.wanted - self.active and not self.may_resume():
            return
        now = time.monotonic()
        self._take_up(
            [
                p
                for p in sorted(self.wanted - self.active)
                if now >= self._retry_at.get(p, 0.0) and self.leads(p)
            ]
        )
