"""The relay simulation's world: one clock, in-memory topics, fake clients, a fake group.

Everything here is single-threaded and driven by :mod:`tests.sim.relay_schedule`:

* :class:`SimTime` replaces the ``time`` module inside the relay's modules. ``monotonic`` is
  the simulated clock; ``sleep`` advances it and lets every standby tail read (the tails are
  threads of their own in production, so they make progress while a worker sleeps).
* :class:`PumpCondition` replaces each standby tail's condition variable: a worker waiting in
  ``snapshot_at`` advances the clock by its wait and lets the tails read, instead of blocking.
* :class:`FakeProducer` holds produced records until they are due (a per-record latency),
  lands them on the log in produce order and calls their delivery callbacks from ``poll`` and
  ``flush`` like librdkafka. A record whose latency exceeds ``message.timeout.ms`` fails with
  ``_MSG_TIMED_OUT`` and does not land, unless :attr:`World.ghosts` is set: then it lands anyway
  (in flight past the timeout, the documented remaining window) and is recorded as a ghost.
* A producer with a ``transactional.id`` gets the transaction calls. ``init_transactions``
  registers a new epoch for its id (:attr:`World.epochs`); the "broker" rejects, at the moment
  it would land, every record produced under an older epoch (``PRODUCER_FENCED``), ghosts
  included; a stale producer's ``commit_transaction`` waits out its timeout and fails, as the
  embedded broker's does. Records land when acknowledged, committed or not (the embedded
  broker shows aborted records to every reader).
* :class:`FakeReader` serves ``prices`` to a standby tail, with end-of-partition events only
  once it really is at the end; it can be silent (a delayed first fetch, a stalled fetcher).
* :class:`FakeConsumer` serves ``prices.raw`` from the relay group's committed offsets.
* :class:`SimNeli` answers ``leads``/``in_grace``/``end_grace`` from the simulated group
  (:class:`World`'s coordinator state), which follows the NELI rules the relay relies on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from pricing_ha.config import RelayConfig

#: The relay producer's message.timeout.ms (what the relay's waits rely on).
MESSAGE_TIMEOUT_S = RelayConfig().output_timeout_ms / 1000
#: e: heartbeat timestamps are good to within this (RelayConfig's clock skew bound).
SKEW_S = RelayConfig().clock_skew_ms / 1000


class SimTime:
    """A stand-in for the ``time`` module: a simulated clock shared by the whole world."""

    def __init__(self) -> None:
        """Start the clock at an arbitrary instant."""
        self.now = 1000.0
        self.world: World | None = None

    def monotonic(self) -> float:
        """The simulated monotonic clock."""
        return self.now

    def time(self) -> float:
        """Wall time, tied to the simulated clock."""
        return 1_700_000_000.0 + self.now

    def time_ns(self) -> int:
        """Wall time in ns."""
        return int(self.time() * 1e9)

    def advance(self, seconds: float) -> None:
        """Move the clock on."""
        self.now += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        """A worker sleeps: time passes and the tails (other threads) read."""
        self.advance(seconds)
        if self.world is not None:
            self.world.pump()


class PumpCondition:
    """A tail's condition variable whose ``wait`` lets simulated time pass instead."""

    def __init__(self, clock: SimTime) -> None:
        """Wrap the shared clock."""
        self._clock = clock

    def __enter__(self) -> PumpCondition:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def notify_all(self) -> None:
        """Nobody blocks in the simulation."""

    def wait(self, timeout: float | None = None) -> bool:
        """Time passes; the tails read."""
        self._clock.sleep(timeout or 0.0)
        return True


def _msg(topic: str, partition: int, offset: int, **fields: Any) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, **fields)


@dataclass
class _Pending:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, Any]]
    callback: Any
    due: float
    outcome: str  # "ok" | "timeout" | "fail"
    purged: bool = False
    fence: tuple[str, int] | None = None  # (transactional.id, epoch) of its producer
    produced: float = 0.0  # when it was produced: its CreateTime


@dataclass
class Faults:
    """One member's injected faults (until the given simulated instants)."""

    slow_until: float = 0.0  # records produced before this take 0.2-5 s
    fail_until: float = 0.0  # records produced before this fail (timed out)
    silent_until: float = 0.0  # the standby reader returns nothing


class FakeProducer:
    """librdkafka's producer surface as the relay uses it (see the module docstring)."""

    def __init__(self, world: World, owner: str, settings: dict[str, Any] | None = None) -> None:
        """A producer of member ``owner`` (transactional if ``settings`` give an id)."""
        self._world = world
        self._owner = owner
        self._pending: list[_Pending] = []
        self._last_due = 0.0
        self._txid: str | None = (settings or {}).get("transactional.id")
        self._epoch: int | None = None
        self._failed_in_txn = False

    # -- transactions -----------------------------------------------------------------------

    def _stale(self) -> bool:
        assert self._txid is not None
        return self._epoch != self._world.epochs.get(self._txid)

    def init_transactions(self, timeout: float = -1) -> None:
        """A new epoch for the id: the previous holder's records are rejected from now on."""
        assert self._txid is not None, "not a transactional producer"
        world = self._world
        if world.clock.now < world.faults[self._owner].slow_until:
            world.clock.advance(min(timeout, 1.0))
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        world.epochs[self._txid] = world.epochs.get(self._txid, 0) + 1
        self._epoch = world.epochs[self._txid]
        world.note(f"  {self._owner} init_transactions {self._txid} epoch {self._epoch}")

    def begin_transaction(self) -> None:
        """Start a transaction (fails at once once fenced)."""
        if self._epoch is None or self._stale():
            raise KafkaException(KafkaError(KafkaError._FENCED))
        self._failed_in_txn = False

    def commit_transaction(self, timeout: float = -1) -> None:
        """Flush, then commit; a fenced producer waits out ``timeout`` and fails."""
        left = self.flush(timeout)
        if self._stale():
            self._world.clock.advance(timeout)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        if left or self._failed_in_txn:
            raise KafkaException(KafkaError(KafkaError._STATE))

    def produce(  # noqa: PLR0917 - confluent-kafka's signature
        self,
        topic: str,
        key: bytes | None = None,
        value: bytes | None = None,
        partition: int = -1,
        headers: list[tuple[str, Any]] | None = None,
        on_delivery: Any = None,
    ) -> None:
        """Queue a record with its latency and fate."""
        world = self._world
        now = world.clock.now
        faults = world.faults[self._owner]
        rng = world.rng
        latency = rng.uniform(0.2, 5.0) if now < faults.slow_until else rng.uniform(0.001, 0.01)
        outcome = "ok"
        if now < faults.fail_until:
            outcome = "fail"
        elif latency > MESSAGE_TIMEOUT_S:
            outcome = "timeout"
        if not self._world.output_gaps:
            # In order per partition: behind a record that will fail, every later record of
            # the partition fails too (the embedded broker fences the producer after a
            # timeout). With output_gaps, a later record may land (Kafka accepts the bumped
            # epoch: librdkafka's idempotent producer without the gapless guarantee).
            earlier = [r for r in self._pending if r.partition == partition and r.topic == topic]
            if earlier and earlier[-1].outcome != "ok":
                outcome = earlier[-1].outcome
        due = max(self._last_due, now + min(latency, MESSAGE_TIMEOUT_S))
        self._last_due = due
        fence = None if self._txid is None or self._epoch is None else (self._txid, self._epoch)
        self._pending.append(
            _Pending(
                topic,
                partition,
                key,
                value,
                list(headers or []),
                self._delivered(on_delivery),
                due,
                outcome,
                fence=fence,
                produced=now,
            )
        )

    def _delivered(self, on_delivery: Any) -> Any:
        if self._txid is None:
            return on_delivery

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self._failed_in_txn = True
            if on_delivery is not None:
                on_delivery(err, msg)

        return delivered

    def _settle(self) -> None:
        now = self._world.clock.now
        while self._pending and (self._pending[0].due <= now or self._pending[0].purged):
            rec = self._pending.pop(0)
            self._world.deliver(self._owner, rec)

    def poll(self, timeout: float = 0) -> int:
        """Serve the callbacks of records that are due."""
        before = len(self._pending)
        self._settle()
        return before - len(self._pending)

    def flush(self, timeout: float = 0) -> int:
        """Wait (simulated time) up to ``timeout`` for every record; return how many are left."""
        clock = self._world.clock
        if self._pending:
            last = (
                max(r.due for r in self._pending if not r.purged)
                if any(not r.purged for r in self._pending)
                else clock.now
            )
            clock.advance(min(last, clock.now + timeout) - clock.now)
            self._settle()
            self._world.pump()
        return len(self._pending)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail everything still held (callbacks at the next poll or flush)."""
        for rec in self._pending:
            rec.purged = True

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        """The broker answers (no broker outage is modelled beyond slow acknowledgements)."""
        if self._world.clock.now < self._world.faults[self._owner].slow_until:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return object()

    def __len__(self) -> int:
        return len(self._pending)


class FakeReader:
    """The standby tail's consumer of ``prices``."""

    def __init__(self, world: World, owner: str) -> None:
        """A reader of member ``owner``."""
        self._world = world
        self._owner = owner
        self.positions: dict[int, int] = {}
        self._eof_sent: dict[int, bool] = {}

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Read exactly ``partitions``, each from its offset (a logical offset: the start)."""
        self.positions = {tp.partition: max(0, tp.offset) for tp in partitions}
        self._eof_sent = dict.fromkeys(self.positions, False)

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]:
        """The partition's first and next offsets."""
        return 0, len(self._world.logs[self._world.prices][partition.partition])

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        """What was appended since, then one end-of-partition event per partition at its end."""
        world = self._world
        if world.clock.now < world.faults[self._owner].silent_until:
            return []
        out: list[Message] = []
        log = world.logs[world.prices]
        for p in sorted(self.positions):
            records = log[p]
            pos = self.positions[p]
            take = records[pos : pos + max(0, num_messages - len(out))]
            out.extend(take)
            self.positions[p] = pos + len(take)
            if take:
                self._eof_sent[p] = False
            at_end = self.positions[p] == len(records)
            if at_end and not self._eof_sent[p] and len(out) < num_messages:
                self._eof_sent[p] = True
                err = KafkaError(KafkaError._PARTITION_EOF)
                out.append(_msg(world.prices, p, len(records), error=err))
        return out

    def close(self) -> None:
        """Nothing to close."""


class FakeConsumer:
    """The relay's ``prices.raw`` consumer (manual assignment, shared committed offsets)."""

    def __init__(self, world: World) -> None:
        """A consumer in the relay group."""
        self._world = world
        self.positions: dict[int, int] = {}
        self.paused: set[int] = set()

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        """The group's committed offsets, or the query fails (one time in four): the relay
        then leaves the lookup to the consumer (assigns without an offset)."""
        if self._world.rng.random() < 0.25:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        committed = self._world.committed
        return [
            TopicPartition(tp.topic, tp.partition, committed.get(tp.partition, OFFSET_INVALID))
            for tp in partitions
        ]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Start each partition at its given offset, else the group's committed offset (else
        the beginning)."""
        for tp in partitions:
            if tp.offset >= 0:
                self.positions[tp.partition] = tp.offset
            elif tp.offset == OFFSET_BEGINNING:
                self.positions[tp.partition] = 0
            else:
                self.positions[tp.partition] = self._world.committed.get(tp.partition, 0)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Stop reading."""
        for tp in partitions:
            self.positions.pop(tp.partition, None)
            self.paused.discard(tp.partition)

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching these partitions (they stay assigned)."""
        self.paused.update(tp.partition for tp in partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Fetch them again, from their positions."""
        self.paused.difference_update(tp.partition for tp in partitions)

    def seek(self, partition: TopicPartition) -> None:
        """Read an assigned partition again from ``partition.offset`` (or its beginning)."""
        if partition.partition not in self.positions:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        if partition.offset == OFFSET_BEGINNING:
            self.positions[partition.partition] = 0
        elif partition.offset >= 0:
            self.positions[partition.partition] = partition.offset
        else:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG))

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        """Store the offsets (last write wins, as with manual assignment in Kafka)."""
        for tp in offsets:
            self._world.committed[tp.partition] = tp.offset

    def take(self, limit: int, rng: random.Random) -> list[Message]:
        """Up to ``limit`` records from the assigned partitions, interleaved."""
        log = self._world.logs[self._world.raw]
        out: list[Message] = []
        parts = sorted(set(self.positions) - self.paused)
        rng.shuffle(parts)
        for p in parts:
            pos = self.positions[p]
            take = log[p][pos : pos + rng.randint(0, limit)]
            out.extend(take)
            self.positions[p] = pos + len(take)
        return out

    def close(self) -> None:
        """Nothing to close."""


class SimNeli:
    """One member's view of the simulated group (the relay's ``LeadershipSource``)."""

    def __init__(self, world: World, name: str) -> None:
        """Member ``name`` of ``world``'s group."""
        self._world = world
        self._name = name

    def leads(self, partition: int) -> bool:
        """Whether this member leads ``partition`` now (see :meth:`World.leads`)."""
        return self._world.leads(self._name, partition)

    def in_grace(self) -> frozenset[int]:
        """Partitions assigned to this member and still in their grace period."""
        w = self._world
        return frozenset(
            p
            for p, own in w.owner.items()
            if own == self._name and w.clock.now < w.grace_until.get(p, 0.0)
        )

    def recovering(self) -> bool:
        """Whether a stall holds this member off (until ``World.stalled_until``)."""
        return self._world.clock.now < self._world.stalled_until.get(self._name, 0.0)

    def assigned_since(self, partition: int) -> float | None:
        """When ``partition`` was last assigned to this member (simulated wall time): also
        while fenced, or a zombie there (its NELI has not noticed the move); ``None`` once
        it is not assigned, as NELI says."""
        world = self._world
        if (
            world.owner.get(partition) != self._name
            and (self._name, partition) not in world.zombies
        ):
            return None
        return world.assigned_at.get((self._name, partition))

    def previous_holder_silent_s(self, partition: int) -> float | None:
        """NELI's evidence about the previous holder (see :meth:`World.move`): the longest
        silence consistent with when it last led (its last heartbeat may have been sent up
        to T before that), or ``None`` where the move left no evidence."""
        w = self._world
        ended = w.evidence.get(partition)
        if w.owner.get(partition) != self._name or ended is None:
            return None
        return w.clock.now - ended + w.threshold_s

    def end_grace(self, partition: int) -> bool:
        """End the grace period now (the relay has proof nobody else can append)."""
        w = self._world
        if partition not in self.in_grace():
            return False
        w.grace_until[partition] = w.clock.now
        w.note(f"{self._name} ends grace of {partition}")
        w.acquired(partition)
        return True


@dataclass
class World:
    """The simulated cluster: logs, offsets, the group's assignment, faults (see module doc)."""

    clock: SimTime
    rng: random.Random
    raw: str
    prices: str
    threshold_s: float
    partitions: int
    ghosts: bool = False
    output_gaps: bool = False
    logs: dict[str, list[list[Message]]] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)
    owner: dict[int, str | None] = field(default_factory=dict)
    grace_until: dict[int, float] = field(default_factory=dict)
    # partition -> when its previous holder last led it, where NELI has evidence of that
    evidence: dict[int, float] = field(default_factory=dict)
    last_led: dict[int, float] = field(default_factory=dict)  # partition -> a holder's end
    evidence_rng: random.Random = field(default_factory=random.Random)  # set per seed
    evidence_share: float = 0.7  # of moves after which NELI has evidence (see move)
    acquired_sent: dict[int, bool] = field(default_factory=dict)
    stalled_until: dict[str, float] = field(default_factory=dict)  # member -> held off until
    fenced: set[tuple[str, int]] = field(default_factory=set)
    zombies: dict[tuple[str, int], float] = field(default_factory=dict)
    #: (member, partition) -> when the group last gave it the partition
    assigned_at: dict[tuple[str, int], float] = field(default_factory=dict)
    faults: dict[str, Faults] = field(default_factory=dict)
    ghost_records: set[tuple[int, int]] = field(default_factory=set)
    epochs: dict[str, int] = field(default_factory=dict)  # transactional.id -> current epoch
    ghost_due: dict[tuple[str, int], float] = field(default_factory=dict)  # last ghost's landing
    in_flight: list[tuple[float, Any]] = field(default_factory=list)
    workers: dict[str, Any] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)
    verbose: bool = False

    def topic(self, name: str) -> list[list[Message]]:
        """The partitions of topic ``name`` (created on first use)."""
        if name not in self.logs:
            self.logs[name] = [[] for _ in range(self.partitions)]
        return self.logs[name]

    def note(self, line: str) -> None:
        """Keep a line for the trace of a failing schedule."""
        if self.verbose:
            self.trace.append(f"{self.clock.now - 1000:8.3f} {line}")

    # -- the log ----------------------------------------------------------------------------

    def append(self, topic: str, partition: int, **fields: Any) -> int:
        """Append a record; returns its offset."""
        records = self.topic(topic)[partition]
        offset = len(records)
        records.append(_msg(topic, partition, offset, **fields))
        return offset

    def land(self, rec: _Pending) -> int:
        """Append a produced record, stamped with when it was produced (its CreateTime)."""
        return self.append(
            rec.topic,
            rec.partition,
            key=rec.key,
            value=rec.value,
            headers=rec.headers,
            timestamp=(TIMESTAMP_CREATE_TIME, round(rec.produced * 1000)),
        )

    def fenced_out(self, rec: _Pending) -> bool:
        """Whether the broker rejects ``rec`` now: its producer's epoch is no longer current."""
        return rec.fence is not None and self.epochs.get(rec.fence[0]) != rec.fence[1]

    def deliver(self, owner: str, rec: _Pending) -> None:
        """Settle one produced record: land it (or not) and call its callback."""
        err: KafkaError | None = None
        lands = rec.outcome == "ok" and not rec.purged
        if rec.purged:
            err = KafkaError(KafkaError._PURGE_QUEUE)
        elif self.fenced_out(rec):
            err = KafkaError(KafkaError.PRODUCER_FENCED)
            lands = False
        elif rec.outcome != "ok":
            err = KafkaError(KafkaError._MSG_TIMED_OUT)
            if self.ghosts and rec.outcome == "timeout":
                lands = True  # in flight past the timeout, landed anyway
        offset = -1
        if lands and err is not None:
            # Reported timed out, still in flight: it lands a little later, in the order it
            # was produced (one producer's requests to a partition stay in order).
            lane = (owner, rec.partition)
            due = max(self.clock.now + self.rng.uniform(0.01, 1.0), self.ghost_due.get(lane, 0))
            self.ghost_due[lane] = due
            self.in_flight.append((due, rec))
            self.note(
                f"  {owner} ghost in flight {rec.partition} {_describe(rec.headers, rec.key)}"
            )
            lands = False
        if lands:
            offset = self.land(rec)
            if self.verbose and rec.topic == self.prices:
                self.note(
                    f"  {owner} lands {rec.partition}@{offset} {_describe(rec.headers, rec.key)}"
                )
        elif self.verbose and rec.topic == self.prices:
            self.note(f"  {owner} FAILS {rec.partition} {_describe(rec.headers, rec.key)} ({err})")
        if rec.callback is not None:
            rec.callback(err, _msg(rec.topic, rec.partition, offset, key=rec.key))

    def pump(self) -> None:
        """Let every standby tail read what it can (they run concurrently in production)."""
        for worker in self.workers.values():
            worker.standby.step(0)

    # -- the group --------------------------------------------------------------------------

    def leads(self, name: str, partition: int) -> bool:
        """NELI's answer: a zombie until its own fence; else assigned, not fenced, past grace."""
        now = self.clock.now
        if now < self.stalled_until.get(name, 0.0):
            return False  # a stall holds it off: it leads nothing (neli.Neli.recovering)
        until = self.zombies.get((name, partition))
        if until is not None and now < until:
            return True
        return (
            self.owner.get(partition) == name
            and (name, partition) not in self.fenced
            and now >= self.grace_until.get(partition, 0.0)
        )

    def _command(self, name: str, op: str, partition: int) -> None:
        """A barrier event reaches member ``name``: its worker gets the command (queued)."""
        self.note(f"{name} <- {op} {partition} (queued for its worker)")
        self.workers[name].request(op, partition)

    def acquired(self, partition: int) -> None:
        """ACQUIRED: the owner leads ``partition`` (its grace is over): assign it."""
        name = self.owner.get(partition)
        if name is None or self.acquired_sent.get(partition):
            return
        self.acquired_sent[partition] = True
        self._command(name, "assign", partition)

    def tick(self) -> None:
        """Time-driven events: ghosts landing, grace periods ending, zombies fencing."""
        now = self.clock.now
        due = [i for i in self.in_flight if i[0] <= now]
        for item in sorted(due, key=lambda i: i[0]):
            self.in_flight.remove(item)
            rec = item[1]
            if self.fenced_out(rec):
                self.note(f"  ghost of {rec.partition} rejected: its producer was fenced")
                continue
            offset = self.land(rec)
            if rec.topic == self.prices:
                self.ghost_records.add((rec.partition, offset))
                self.note(
                    f"  GHOST lands {rec.partition}@{offset} {_describe(rec.headers, rec.key)}"
                )
        for (name, partition), until in sorted(self.zombies.items()):
            if now >= until:
                del self.zombies[(name, partition)]
                self.last_led[partition] = max(self.last_led.get(partition, until), until)
                self.note(f"{name} fences itself on {partition} (zombie ends)")
                if self.owner.get(partition) != name:
                    # Its session found lost (or its fence): handed over, as its barrier
                    # handler asks (the worker lets go at once if it holds no term).
                    self._command(name, "handover", partition)
        for partition, owner in sorted(self.owner.items(), key=lambda kv: kv[0]):
            if (
                owner is not None
                and (owner, partition) not in self.fenced
                and now >= self.grace_until.get(partition, 0.0)
                and now >= self.stalled_until.get(owner, 0.0)  # (NELI leads nothing then)
            ):
                self.acquired(partition)

    def _revoke(self, partition: int, *, planned: bool, zombie_s: float) -> None:
        old = self.owner.get(partition)
        if old is None:
            return
        if (old, partition) not in self.fenced:
            ended = self.clock.now + (0.0 if planned else zombie_s)
            self.last_led[partition] = max(self.last_led.get(partition, ended), ended)
        self.owner[partition] = None
        was_fenced = (old, partition) in self.fenced
        self.fenced.discard((old, partition))
        if was_fenced:
            return  # it already unassigned when fenced
        if planned:
            self._command(old, "handover", partition)
        elif zombie_s > 0:
            # Cut off from the coordinator: it still believes it leads until its own
            # heartbeat check fails, always before the successor's grace period T ends.
            self.zombies[(old, partition)] = self.clock.now + zombie_s
        else:
            self._command(old, "handover", partition)  # a lost session: as planned, to it

    def move(self, partition: int, new: str | None, *, planned: bool, zombie_s: float) -> None:
        """Reassign ``partition`` (to nobody when ``new`` is None)."""
        self.note(f"group: {partition} -> {new} planned={planned} zombie={zombie_s:.3f}")
        self._revoke(partition, planned=planned, zombie_s=zombie_s)
        if new is None:
            return
        self.zombies.pop((new, partition), None)
        self.owner[partition] = new
        now = self.clock.now
        self.assigned_at[(new, partition)] = now
        self.grace_until[partition] = now + self.threshold_s
        self.evidence.pop(partition, None)
        ended = self.last_led.get(partition)
        if ended is not None and self.evidence_rng.random() < self.evidence_share:
            # NELI's evidence (its own heartbeat back, the previous holder's last one read):
            # the grace period ends once that heartbeat is T + e old, i.e. (at the earliest,
            # the heartbeat sent T before the holder last led) e after it last led.
            self.evidence[partition] = ended
            self.grace_until[partition] = min(
                now + self.threshold_s, max(now + 0.05, ended + SKEW_S)
            )
        self.acquired_sent[partition] = False

    def fence(self, name: str, partition: int) -> None:
        """FENCED: the owner's own heartbeat did not return; it stops leading."""
        if self.owner.get(partition) != name or (name, partition) in self.fenced:
            return
        self.note(f"{name} FENCED on {partition}")
        self.fenced.add((name, partition))
        self.last_led[partition] = self.clock.now
        self.acquired_sent[partition] = False
        self._command(name, "handover", partition)  # as its barrier handler asks

    def resume(self, name: str, partition: int) -> None:
        """RESUMED: heartbeats fresh again; it leads again (no grace: nobody else did)."""
        if (name, partition) not in self.fenced:
            return
        self.note(f"{name} RESUMED on {partition}")
        self.fenced.discard((name, partition))
        if self.clock.now >= self.grace_until.get(partition, 0.0):
            self.acquired(partition)


def _describe(headers: list[tuple[str, Any]], key: bytes | None = None) -> str:
    d = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in headers}
    if "pricing-ha-control" in d:
        return f"[{d['pricing-ha-control']} {d.get('relay')} term={d.get('term', '-')}]"
    return f"{key!r} seq={d.get('seq')} from {d.get('relay')}"
