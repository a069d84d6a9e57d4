"""The relay simulation's world: in-memory topics, the group, faults, and the trace.

Everything in the relay simulation is single-threaded and driven by
:mod:`tests.sim.relay.relay_schedule`. The :class:`World` holds the logs of every topic, the relay
group's committed offsets, the NELI group's assignment (owners, grace periods, fences,
zombies, stalls), each member's injected :class:`Faults` and the records in flight, and decides
when a produced record lands. Around it, in their own modules:

* :mod:`tests.sim.relay.relay_clock`: the one simulated clock (``SimTime``, ``PumpCondition``);
* :mod:`tests.sim.relay.relay_producer`: the fake producer (latencies, timeouts, ghosts,
  transactions and their fencing);
* :mod:`tests.sim.relay.relay_consumers`: the fake readers of ``prices`` and ``prices.raw``;
* :mod:`tests.sim.relay.relay_neli`: each member's view of the group (``SimNeli``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, Message

from pricing_ha.config import RelayConfig

if TYPE_CHECKING:
    from tests.sim.relay.relay_clock import SimTime
    from tests.sim.relay.relay_members import Members
    from tests.sim.relay.relay_producer import Pending

#: e: heartbeat timestamps are good to within this (RelayConfig's clock skew bound).
SKEW_S = RelayConfig().clock_skew_ms / 1000


def message(topic: str, partition: int, offset: int, **fields: Any) -> Message:
    """A consumed record (or a delivery report, or an event) as confluent-kafka makes one."""
    return Message(topic=topic, partition=partition, offset=offset, **fields)


@dataclass
class Faults:
    """One member's injected faults (until the given simulated instants)."""

    slow_until: float = 0.0  # records produced before this take 0.2-5 s
    fail_until: float = 0.0  # records produced before this fail (timed out)
    silent_until: float = 0.0  # the standby reader returns nothing


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
    #: member -> what stops it in its next flush with records pending (a SIGSTOP that lands
    #: mid-transaction: the others run meanwhile; :mod:`tests.sim.relay.relay_members`)
    stop_in_flush: dict[str, Any] = field(default_factory=dict)
    in_flush: set[str] = field(default_factory=set)  # members stopped in a flush now
    workers: dict[str, Any] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)
    verbose: bool = False
    #: the processes and their heartbeats (:mod:`tests.sim.relay.relay_members`): with the detector
    members: Members | None = None
    #: (partition, offset) of prices -> (transactional.id, epoch) of the producer that wrote it
    writer_of: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)
    fenced_records: int = 0  # records for prices the broker rejected: their writer was fenced

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
        records.append(message(topic, partition, offset, **fields))
        return offset

    def land(self, rec: Pending) -> int:
        """Append a produced record, stamped with when it was produced (its CreateTime)."""
        offset = self.append(
            rec.topic,
            rec.partition,
            key=rec.key,
            value=rec.value,
            headers=rec.headers,
            timestamp=(TIMESTAMP_CREATE_TIME, round(rec.produced * 1000)),
        )
        if rec.topic == self.prices and rec.fence is not None:
            self.writer_of[(rec.partition, offset)] = rec.fence
        return offset

    def fenced_out(self, rec: Pending) -> bool:
        """Whether the broker rejects ``rec`` now: its producer's epoch is no longer current."""
        return rec.fence is not None and self.epochs.get(rec.fence[0]) != rec.fence[1]

    def deliver(self, owner: str, rec: Pending) -> None:
        """Settle one produced record: land it (or not) and call its callback."""
        err: KafkaError | None = None
        lands = rec.outcome == "ok" and not rec.purged
        if rec.purged:
            err = KafkaError(KafkaError._PURGE_QUEUE)
        elif self.fenced_out(rec):
            err = KafkaError(KafkaError.PRODUCER_FENCED)
            lands = False
            self.fenced_records += rec.topic == self.prices
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
            rec.callback(err, message(rec.topic, rec.partition, offset, key=rec.key))

    def pump(self) -> None:
        """Let every standby tail read what it can (they run concurrently in production)."""
        members = self.members
        if members is not None:
            members.heartbeats(self.clock.now)
        for name, worker in self.workers.items():
            if members is None or members.runs(name):
                worker.standby.step(0)

    # -- the group --------------------------------------------------------------------------

    def leads(self, name: str, partition: int) -> bool:
        """NELI's answer: a zombie until its own fence; else assigned, not fenced, past grace."""
        now = self.clock.now
        if now < self.stalled_until.get(name, 0.0):
            return False  # a stall holds it off: it leads nothing (Takeover.recovering)
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
        if self.members is not None:
            self.members.tick()
        due = [i for i in self.in_flight if i[0] <= now]
        for item in sorted(due, key=lambda i: i[0]):
            self.in_flight.remove(item)
            rec = item[1]
            if self.fenced_out(rec):
                self.fenced_records += rec.topic == self.prices
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
        if (zombie_s <= 0 or planned) and not self.acquired_sent.get(partition):
            # NELI reports REVOKED only for a partition it reported ACQUIRED (or FENCED):
            # one revoked before that (its grace period ended moments ago) gets no event.
            self.note(f"{old} revoked from {partition} before ACQUIRED: no event")
            return
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
        now = self.clock.now
        self.note(f"group: {partition} -> {new} planned={planned} zombie={zombie_s:.3f}")
        self._revoke(partition, planned=planned, zombie_s=zombie_s)
        if new is None:
            return
        if self.zombies.pop((new, partition), None) is not None:
            # A zombie assigned the partition again has rejoined the group, so NELI has told
            # it first that its session was lost (REVOKED), as at the zombie's end (tick).
            # Dropped silently, the member kept its old term past a revocation NELI never
            # reports without one (seed 33492: its stale arbiter emitted again what the owner
            # in between had emitted).
            self.last_led[partition] = max(self.last_led.get(partition, now), now)
            self.note(f"{new} fences itself on {partition} (rejoined: its session was lost)")
            self._command(new, "handover", partition)
        self.owner[partition] = new
        self.assigned_at[(new, partition)] = now
        self.grace_until[partition] = now + self.threshold_s
        ended = self.last_led.get(partition)
        if ended is not None and self.evidence_rng.random() < self.evidence_share:
            # NELI's evidence (its own heartbeat back, the previous holder's last one read):
            # the grace period ends once that heartbeat is T + e old, i.e. (at the earliest,
            # the heartbeat sent T before the holder last led) e after it last led.
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
