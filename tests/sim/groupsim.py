"""A deterministic, broker-free simulation of one NELI group, driving the real tracker.

Every member is a real :class:`neli._tracker.LeadershipTracker` fed the way ``neli._runtime``
and ``neli._poller`` feed it (watchdog ticks, rebalance callbacks, consumed heartbeats,
evaluations), with its own clocks. Around the members the simulation models, in integer
milliseconds of *true* time:

* a **group coordinator** (classic protocol): group heartbeats every ``hb_ms`` (S/4), session
  expiry after S without one, joins, clean leaves, eager rebalances (every member revokes
  everything, then is assigned round-robin) and two-round cooperative ones (round one withholds
  the partitions that change owner, their old owners revoke them and rejoin, round two assigns
  them); a member that gets no successful group heartbeat response for S declares its session
  lost (librdkafka's client-side check), at most ``lost_lag_ms`` late;
* the **NELI topic**: heartbeats (publish timestamp = the sender's wall clock, CreateTime) are
  appended after a random delay and fetched, in order, by the member the consumer assigns the
  partition to, after that member's fetch delay; a new owner reads from the position the group
  last committed (each owner commits every second), else from the end of the log;
* **clocks**: each member's wall clock is off true time by at most e/2 (so any two differ by at
  most e), optionally stepped; its monotonic clock runs at true rate except, optionally, not at
  all during a pause (a "frozen" monotonic clock, as in some VM pauses);
* **faults**: crash, pause of any length (optionally with a frozen monotonic clock), restart,
  cut of the coordinator link (both ways), loss of the member's produces (heartbeat send
  failures) or of its fetches (one-way loss towards the topic), and a **broker stall** (the
  group coordinator answers nobody and expires nobody, and no heartbeat is appended or fetched,
  as when the one broker is paused).

A schedule is a seed plus a list of :class:`Event`; the seed also draws the delays, so a
schedule replays exactly. See ``tests/sim/__init__.py`` for the invariants and assumptions.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from neli import Heartbeat, Mode, NeliConfig, Variant
from neli._tracker import LeadershipTracker

WALL_EPOCH = 1_700_000_000.0
#: The NELI consumer's auto-commit interval (``auto.commit.interval.ms``).
_COMMIT_MS = 1000
MONO_BASE = 1000.0

TrackerFactory = Callable[[NeliConfig, str], LeadershipTracker]


@dataclass(frozen=True)
class Scenario:
    """Timing and shape of one simulated group (all durations in ms)."""

    name: str
    variant: Variant
    mode: Mode
    session_ms: int
    threshold_ms: int
    pulse_ms: int = 300
    skew_ms: int = 200
    cooperative: bool = True
    keep_leading: bool = False
    members: int = 3
    partitions: int = 4
    duration_ms: int = 16_000
    dt_ms: int = 25
    #: Upper bounds of the random delays.
    produce_delay_ms: int = 60
    fetch_delay_ms: int = 60
    rtt_ms: int = 40
    lost_lag_ms: int = 250
    #: Fault mix.
    max_events: int = 8
    frozen_pauses: bool = False
    wall_steps_beyond_e: bool = False
    #: Give the tracker's watchdog the wall clock too (as the runtime does).
    wall_stall_guard: bool = True

    @property
    def hb_ms(self) -> int:
        """The group heartbeat interval, S/4 as ``NeliConfig.consumer_settings`` sets it."""
        return max(100, self.session_ms // 4)

    def config(self, member_name: str) -> NeliConfig:
        """The member's NeliConfig (validated by neli itself)."""
        return NeliConfig(
            bootstrap_servers="sim:9092",
            group_id="sim",
            topic="neli",
            variant=self.variant,
            mode=self.mode,
            session_timeout_ms=self.session_ms,
            threshold_ms=self.threshold_ms,
            pulse_interval_ms=self.pulse_ms,
            clock_skew_ms=self.skew_ms,
            check_interval_ms=self.dt_ms,
            member_name=member_name,
            assignment_strategy="cooperative-sticky" if self.cooperative else "roundrobin",
            keep_leading_when_isolated=self.keep_leading,
        )


#: Fault kinds that open a window in which a non-exclusive partition may lack a leader.
FAULTS = frozenset({"crash", "pause", "cut_coord", "cut_produce", "cut_fetch", "broker_stall"})


@dataclass(frozen=True)
class Event:
    """One scheduled event: ``kind`` happens to member slot ``member`` at true time ``at``.

    Kinds: ``crash``, ``restart`` (a crashed or departed slot starts a new process),
    ``leave`` (clean close), ``pause`` (``arg`` ms; ``frozen``: its monotonic clock stops),
    ``cut_coord`` / ``cut_produce`` / ``cut_fetch`` (``arg`` ms), ``wall_step`` (``arg`` ms),
    ``broker_stall`` (``arg`` ms; the whole group's coordinator, ``member`` is ignored).
    """

    at: int
    kind: str
    member: int
    arg: int = 0
    frozen: bool = False

    def __str__(self) -> str:
        extra = f", {self.arg}" if self.arg else ""
        extra += ", frozen=True" if self.frozen else ""
        # Double quotes: the printed replay command wraps the list in single quotes.
        return f'Event({self.at}, "{self.kind}", {self.member}{extra})'


@dataclass
class Violation:
    """An invariant broken at true time ``at``."""

    at: int
    partition: int
    what: str

    def __str__(self) -> str:
        return f"t={self.at} ms, partition {self.partition}: {self.what}"


@dataclass(order=True)
class _Msg:
    at: int
    seq: int
    kind: str = field(compare=False)
    member_id: str = field(compare=False)
    data: object = field(compare=False, default=None)


@dataclass
class _Record:
    append_at: int
    hb: Heartbeat
    publish_wall: float


class _Proc:
    """One process of a member slot (a restart makes a new one)."""

    def __init__(self, sim: Simulation, slot: int, incarnation: int, now: int) -> None:
        sc = sim.scenario
        self.sim = sim
        self.slot = slot
        self.member_id = f"m{slot}/{incarnation}"
        self.config = sc.config(f"m{slot}")
        self.tracker = sim.tracker_factory(self.config, self.member_id)
        self.alive = True
        self.leaving_until: int | None = None  # non-exclusive hand-over after a clean leave
        self.paused_until = -1
        self.frozen_from: int | None = None
        self.mono_lag = 0  # ms the monotonic clock lost to frozen pauses
        self.mono_off = sim.rng.randint(0, 10_000)
        self.wall_off = sim.rng.randint(-sc.skew_ms // 2, sc.skew_ms // 2)
        self.fetch_delay = sim.rng.randint(0, sc.fetch_delay_ms)
        self.assignment: set[int] = set()  # the consumer's (what it fetches)
        self.positions: dict[int, int] = {}
        #: Fast exclusive: per partition, the index of the latest own heartbeat read (the
        #: offset the runtime stores for the auto-commit).
        self.stored: dict[int, int] = {}
        self.in_group = False  # the coordinator answered our join
        self.joining = False
        self.epoch = 0  # counts our (re)joins as a new member
        self.last_ok_mono = self.mono_ms(now)
        self.lost_lag = sim.rng.randint(0, sc.lost_lag_ms)
        self.next_hb = self.mono_ms(now)
        self.next_pulse = self.mono_ms(now)
        self.next_commit = self.mono_ms(now) + _COMMIT_MS
        self.inbox: list[_Msg] = []
        self.counter = 0
        self.tracker.tick(self.mono(now))

    # -- clocks ---------------------------------------------------------------------------------

    def mono_ms(self, now: int) -> int:
        frozen = 0 if self.frozen_from is None else now - self.frozen_from
        return now + self.mono_off - self.mono_lag - frozen

    def mono(self, now: int) -> float:
        return MONO_BASE + self.mono_ms(now) / 1000

    def wall(self, now: int) -> float:
        return WALL_EPOCH + (now + self.wall_off) / 1000

    def running(self, now: int) -> bool:
        return self.alive and now >= self.paused_until

    def leads(self, p: int, now: int) -> bool:
        return self.tracker.leads(p, self.mono(now), self.wall(now))


class Simulation:
    """One run of one schedule."""

    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        events: Sequence[Event],
        tracker_factory: TrackerFactory = LeadershipTracker,
    ) -> None:
        """Prepare the run; :meth:`run` executes it."""
        self.scenario = scenario
        self.seed = seed
        self.events = sorted(events, key=lambda e: e.at)
        self.tracker_factory = tracker_factory
        self.rng = random.Random(seed)
        self.now = 0
        self.seq = 0
        self.procs: dict[int, _Proc] = {}
        self.incarnations = [0] * scenario.members
        self.log: list[list[_Record]] = [[] for _ in range(scenario.partitions)]
        #: The group's committed position per partition (an index into its log).
        self.committed: list[int | None] = [None] * scenario.partitions
        #: Fast exclusive: owners commit the position of their own latest heartbeat (so that
        #: the next owner reads it: the evidence of ``neli._tracker``), not what they read.
        self.store_own = scenario.variant is Variant.FAST and scenario.mode is Mode.EXCLUSIVE
        self.cut: dict[tuple[str, int], int] = {}  # (kind, slot) -> until
        self.stalled_until = -1  # the coordinator answers nobody until then
        self.coord = _Coordinator(self)
        #: (start, end-or-None) of each fault window (see tests/sim/__init__.py).
        self.fault_windows: list[tuple[int, int]] = []
        self.violations: list[Violation] = []
        self.max_gap_after_fault = 0
        #: Partition-instants checked, and how many of them had a leader (coverage).
        self.checks = 0
        self.led_checks = 0
        self.fifo: dict[tuple[bool, str], int] = {}
        #: Called after every step (the replay tool prints leadership changes with it).
        self.on_step: Callable[[], None] | None = None

    # -- helpers -------------------------------------------------------------------------------

    def send(
        self, kind: str, member_id: str, data: object = None, delay: int | None = None
    ) -> None:
        """Queue a message to the coordinator (``kind`` starting with ``c:``) or a member."""
        self.seq += 1
        if delay is None:
            delay = self.rng.randint(1, self.scenario.rtt_ms)
        # One TCP connection per member and direction: messages arrive in the order sent.
        key = (kind.startswith("c:"), member_id)
        at = max(self.now + delay, self.fifo.get(key, 0))
        self.fifo[key] = at
        msg = _Msg(at, self.seq, kind, member_id, data)
        if kind.startswith("c:"):
            bisect.insort(self.coord.inbox, msg)
        else:
            proc = self.proc_by_id(member_id)
            if proc is not None:
                bisect.insort(proc.inbox, msg)

    def proc_by_id(self, member_id: str) -> _Proc | None:
        slot = int(member_id[1 : member_id.index("/")])
        proc = self.procs.get(slot)
        return proc if proc is not None and proc.member_id == member_id and proc.alive else None

    def is_cut(self, kind: str, slot: int) -> bool:
        return self.cut.get((kind, slot), -1) > self.now

    # -- the run ---------------------------------------------------------------------------------

    def run(self, *, stop_at_first: bool = True) -> list[Violation]:
        """Run the schedule; return the invariant violations found."""
        sc = self.scenario
        self.fault_windows.append((0, 0))  # the group forms: nobody leads yet
        for slot in range(sc.members):
            self._start(slot)
        events = list(self.events)
        while self.now <= sc.duration_ms:
            while events and events[0].at <= self.now:
                self._apply(events.pop(0))
            self._check_exclusive()  # before anyone processes anything: the adversarial order
            self.coord.step()
            for slot in sorted(self.procs):
                proc = self.procs[slot]
                if proc.running(self.now):
                    self._step_member(proc)
            self._check_exclusive()
            self._check_at_least_one()
            if self.on_step is not None:
                self.on_step()
            if self.violations and stop_at_first:
                break
            self.now += sc.dt_ms
        return self.violations

    def _start(self, slot: int) -> None:
        self.incarnations[slot] += 1
        proc = _Proc(self, slot, self.incarnations[slot], self.now)
        self.procs[slot] = proc
        self._join(proc)

    def _join(self, proc: _Proc) -> None:
        proc.joining = True
        proc.epoch += 1
        self.send("c:join", proc.member_id, (proc.epoch, set()))

    @staticmethod
    def _fault_window(ev: Event) -> tuple[int, int]:
        """A crash, pause or coordinator cut gets the member's partitions reassigned within W
        of its start however long it lasts; a member cut off from the topic keeps its
        assignment, so its partitions may lack a leader until W after the cut heals; during a
        broker stall nobody's session can expire or be reassigned, and afterwards the
        members whose sessions were lost rejoin, as after any coordinator fault."""
        if ev.kind in ("cut_produce", "cut_fetch", "broker_stall"):
            return ev.at, ev.at + ev.arg
        return ev.at, ev.at

    def _apply(self, ev: Event) -> None:
        proc = self.procs.get(ev.member)
        if ev.kind in FAULTS:
            self.fault_windows.append(self._fault_window(ev))
        if ev.kind == "broker_stall":
            # The group coordinator and the NELI topic's broker stall together (one broker,
            # SIGSTOPped): no group traffic, and no heartbeat appended or fetched meanwhile.
            until = ev.at + ev.arg
            self.stalled_until = max(self.stalled_until, until)
            for slot in range(self.scenario.members):
                for kind in ("cut_produce", "cut_fetch"):
                    self.cut[kind, slot] = max(self.cut.get((kind, slot), -1), until)
            return
        if ev.kind == "restart":
            if not any(p.alive and p.leaving_until is None for p in self.procs.values()):
                self.fault_windows.append((ev.at, ev.at))  # the group forms again
            if proc is None or not proc.alive:
                self._start(ev.member)
            return
        if proc is None or not proc.alive:
            return
        self._apply_to(proc, ev)

    def _apply_to(self, proc: _Proc, ev: Event) -> None:
        if ev.kind == "crash":
            proc.alive = False
        elif ev.kind == "leave":
            self._leave(proc)
        elif ev.kind == "pause":
            proc.paused_until = max(proc.paused_until, self.now + ev.arg)
            if ev.frozen and proc.frozen_from is None:
                proc.frozen_from = self.now
        elif ev.kind in ("cut_coord", "cut_produce", "cut_fetch"):
            self.cut[ev.kind, ev.member] = max(
                self.cut.get((ev.kind, ev.member), -1), ev.at + ev.arg
            )
        elif ev.kind == "wall_step":
            proc.wall_off += ev.arg
            if not self.scenario.wall_steps_beyond_e:
                half = self.scenario.skew_ms // 2
                proc.wall_off = max(-half, min(half, proc.wall_off))

    def _leave(self, proc: _Proc) -> None:
        """``Neli.close()``: non-exclusive hands over (release, lead until stale), then leaves."""
        exclusive = self.scenario.mode is Mode.EXCLUSIVE
        proc.tracker.revoke(sorted(proc.assignment), "closed", release=not exclusive)
        proc.assignment.clear()
        proc.stored.clear()
        if proc.in_group:
            self.send("c:leave", proc.member_id)
        proc.in_group = proc.joining = False
        if exclusive:
            proc.alive = False
        else:
            proc.leaving_until = self.now + self.scenario.threshold_ms + 1000

    # -- one member's step (the runtime's loops) ---------------------------------------------

    def _step_member(self, proc: _Proc) -> None:  # noqa: PLR0912 - the runtime's loops, in order
        sc, now = self.scenario, self.now
        if proc.frozen_from is not None:  # the pause is over: the clock resumes where it stopped
            proc.mono_lag += now - proc.frozen_from
            proc.frozen_from = None
        mono = proc.mono(now)
        tracker = proc.tracker
        tracker.tick(mono, proc.wall(now) if sc.wall_stall_guard else None)
        # Coordinator responses and assignments (the poll thread's rebalance callbacks).
        while proc.inbox and proc.inbox[0].at <= now and not self.is_cut("cut_coord", proc.slot):
            self._member_msg(proc, proc.inbox.pop(0))
            if not proc.alive:
                return
        mono_ms = proc.mono_ms(now)
        if proc.leaving_until is not None:
            if now >= proc.leaving_until or not tracker.led_or_assigned():
                proc.alive = False
                return
        else:
            if proc.in_group and mono_ms - proc.last_ok_mono >= sc.session_ms + proc.lost_lag:
                self._lost(proc, "session lost")
            if mono_ms >= proc.next_hb:
                proc.next_hb = mono_ms + sc.hb_ms
                if proc.in_group or proc.joining:
                    self.send("c:hb", proc.member_id, proc.epoch)
        # Consumed heartbeats.
        if not self.is_cut("cut_fetch", proc.slot):
            for p in sorted(proc.assignment):
                log, pos = self.log[p], proc.positions.get(p, 0)
                while pos < len(log) and log[pos].append_at + proc.fetch_delay <= now:
                    rec = log[pos]
                    tracker.observe(p, rec.hb, rec.publish_wall, mono)
                    if self.store_own and rec.hb.member_id == proc.member_id:
                        proc.stored[p] = pos
                    pos += 1
                proc.positions[p] = pos
        if mono_ms >= proc.next_commit:
            proc.next_commit = mono_ms + _COMMIT_MS
            self._commit(proc)
        # The pulse task.
        if mono_ms >= proc.next_pulse:
            proc.next_pulse = mono_ms + sc.pulse_ms
            self._pulse(proc)
        tracker.evaluate(mono, proc.wall(now))

    def _commit(self, proc: _Proc) -> None:
        """Auto-commit: accepted only from the member the coordinator assigns the partition
        to, outside a rebalance, over a working coordinator link."""
        coord = self.coord
        if (
            self.now < self.stalled_until
            or self.is_cut("cut_coord", proc.slot)
            or coord.rebalancing
            or not proc.running(self.now)
        ):
            return
        for p in proc.assignment:
            if coord.owner.get(p) != proc.member_id:
                continue
            if not self.store_own:
                self.committed[p] = proc.positions.get(p, 0)
            elif p in proc.stored:  # nothing stored yet: nothing committed
                self.committed[p] = proc.stored[p]

    def _pulse(self, proc: _Proc) -> None:
        now, tracker = self.now, proc.tracker
        mono, wall = proc.mono(now), proc.wall(now)
        led = tuple(sorted(tracker.led(mono, wall)))
        if self.scenario.variant is Variant.FULL:
            targets = [(p, 0, None) for p in range(self.scenario.partitions)]
        else:
            targets = [
                (p, tracker.incarnation(p) or 0, tracker.since(p))
                for p in sorted(tracker.assigned())
            ]
        if self.is_cut("cut_produce", proc.slot):
            return
        for p, inc, since in targets:
            proc.counter += 1
            hb = Heartbeat(
                group="sim",
                member_id=proc.member_id,
                member_name=f"m{proc.slot}",
                incarnation=inc,
                counter=proc.counter,
                sent_mono=mono,
                sent_wall=wall,
                led=led,
                since=since,
            )
            at = now + self.rng.randint(1, self.scenario.produce_delay_ms)
            rec = _Record(at, hb, int(wall * 1000) / 1000)  # CreateTime has ms resolution
            log = self.log[p]
            i = len(log)
            while i > 0 and log[i - 1].append_at > at:
                i -= 1
            # Records are appended in arrival order; a consumer past i would never see it.
            log.insert(i, rec)
            for other in self.procs.values():
                if other.positions.get(p, 0) > i:
                    other.positions[p] += 1
                if other.stored.get(p, -1) >= i:
                    other.stored[p] += 1
            committed = self.committed[p]
            if committed is not None and committed > i:
                self.committed[p] = committed + 1

    def _member_msg(self, proc: _Proc, msg: _Msg) -> None:
        exclusive = self.scenario.mode is Mode.EXCLUSIVE
        mono = proc.mono(self.now)
        if msg.kind == "hb_ok":
            proc.last_ok_mono = proc.mono_ms(self.now)
            if msg.data and (proc.in_group or proc.joining):  # a rebalance is in progress: rejoin
                if not self.scenario.cooperative:
                    proc.tracker.revoke(sorted(proc.assignment), "rebalance", release=not exclusive)
                    proc.assignment.clear()
                    proc.stored.clear()
                self._rejoin(proc)
        elif msg.kind == "unknown":  # the coordinator expired us meanwhile
            if msg.data == proc.epoch:  # (answers to heartbeats sent before we rejoined: ignored)
                self._lost(proc, "unknown member")
        elif msg.kind == "assign":
            epoch, given = cast("tuple[int, set[int]]", msg.data)
            if proc.leaving_until is not None or epoch != proc.epoch:
                return  # the answer to a join from before a session loss: librdkafka drops it
            proc.joining = False
            proc.in_group = True
            new: set[int] = set(given)
            gone = proc.assignment - new
            if gone:
                proc.tracker.revoke(sorted(gone), "rebalance", release=not exclusive)
                for p in gone:
                    proc.stored.pop(p, None)
            added = new - proc.assignment
            for p in added:  # from the committed position, else the end of the log as it is now
                log = self.log[p]
                pos = len(log)
                while pos > 0 and log[pos - 1].append_at > self.now:
                    pos -= 1
                committed = self.committed[p]
                proc.positions[p] = pos if committed is None else min(committed, pos)
            proc.assignment = new
            proc.tracker.assign(
                sorted(new), mono, proc.wall(self.now)
            )  # librdkafka passes the incremental set;
            # the tracker ignores partitions it already holds, so the full set is equivalent.
            if gone and self.scenario.cooperative:
                self._rejoin(proc)

    def _rejoin(self, proc: _Proc) -> None:
        proc.joining = True
        proc.last_ok_mono = proc.mono_ms(self.now)  # a join restarts the client's session timer
        self.send("c:rejoin", proc.member_id, (proc.epoch, set(proc.assignment)))

    def _lost(self, proc: _Proc, reason: str) -> None:
        exclusive = self.scenario.mode is Mode.EXCLUSIVE
        proc.tracker.revoke(sorted(proc.assignment), reason, release=not exclusive, lost=True)
        proc.assignment.clear()
        proc.stored.clear()
        proc.in_group = False
        proc.last_ok_mono = proc.mono_ms(self.now)
        proc.lost_lag = self.rng.randint(0, self.scenario.lost_lag_ms)
        self._join(proc)

    # -- invariants ------------------------------------------------------------------------------

    def _check_exclusive(self) -> None:
        if self.scenario.mode is not Mode.EXCLUSIVE:
            return
        running = [p for p in self.procs.values() if p.running(self.now)]
        for part in range(self.scenario.partitions):
            leaders = [p.member_id for p in running if p.leads(part, self.now)]
            self.led_checks += bool(leaders)
            self.checks += 1
            if len(leaders) > 1:
                self.violations.append(
                    Violation(self.now, part, f"two leaders at once: {', '.join(leaders)}")
                )

    def gap_bound_ms(self) -> int:
        """W: how long after a fault a non-exclusive partition may lack a leader.

        Expiry of the faulty member's session (S) plus the member-side loss-detection lag,
        two rebalance rounds (each: the slowest member learns within one group heartbeat
        interval, then join and sync round trips), then the new owner's first heartbeat
        (a pulse, plus produce and fetch delays), plus two simulation steps.
        """
        sc = self.scenario
        rnd = sc.hb_ms + 3 * sc.rtt_ms
        first_beat = sc.pulse_ms + sc.produce_delay_ms + sc.fetch_delay_ms
        return sc.session_ms + sc.lost_lag_ms + 2 * rnd + first_beat + 2 * sc.dt_ms

    def _check_at_least_one(self) -> None:
        if self.scenario.mode is Mode.EXCLUSIVE:
            return
        running = [p for p in self.procs.values() if p.running(self.now)]
        if not any(p.alive and p.leaving_until is None for p in self.procs.values()):
            return  # every member is gone (crashed or left): nobody can lead
        for part in range(self.scenario.partitions):
            self.checks += 1
            if any(p.leads(part, self.now) for p in running):
                self.led_checks += 1
                continue
            since = [self.now - start for start, end in self.fault_windows if start <= self.now]
            covering = [
                self.now - start
                for start, end in self.fault_windows
                if start <= self.now <= end + self.gap_bound_ms()
            ]
            if covering:
                self.max_gap_after_fault = max(self.max_gap_after_fault, min(since))
                continue
            last = f"{min(since)} ms after the last fault" if since else "with no fault"
            self.violations.append(Violation(self.now, part, f"no leader, {last}"))


class _Coordinator:
    """The group coordinator of the classic protocol (true time; no clock of its own)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.inbox: list[_Msg] = []
        self.members: dict[str, int] = {}  # member id -> last heartbeat (true ms)
        self.owner: dict[int, str] = {}
        self.rebalancing = False
        self.joined: set[str] = set()
        self.epochs: dict[str, int] = {}  # the member's (re)join count its assignment answers

    def step(self) -> None:
        sim = self.sim
        now, sc = sim.now, sim.scenario
        if now < sim.stalled_until:
            return  # stalled: requests wait, no reply, no session expiry
        # A cut link delays messages until it heals (TCP retransmits), it does not drop them.
        kept: list[_Msg] = []
        while self.inbox and self.inbox[0].at <= now:
            msg = self.inbox.pop(0)
            slot = int(msg.member_id[1 : msg.member_id.index("/")])
            if sim.is_cut("cut_coord", slot):
                kept.append(msg)
            else:
                self._handle(msg, slot)
        self.inbox[:0] = kept
        for mid, last in list(self.members.items()):
            if now - last >= sc.session_ms:
                self._remove(mid)
        if self.rebalancing and self.joined >= set(self.members):
            self._complete()

    def _reply(self, _slot: int, kind: str, member_id: str, data: object = None) -> None:
        self.sim.send(kind, member_id, data)

    def _handle(self, msg: _Msg, slot: int) -> None:
        mid, now = msg.member_id, self.sim.now
        if msg.kind == "c:hb":
            if mid not in self.members:
                self._reply(slot, "unknown", mid, msg.data)
                return
            self.members[mid] = now
            self._reply(slot, "hb_ok", mid, self.rebalancing and mid not in self.joined)
        elif msg.kind == "c:rejoin" and mid not in self.members:
            self._reply(slot, "unknown", mid, msg.data[0])  # type: ignore[index]
        elif msg.kind in ("c:join", "c:rejoin"):
            self.epochs[mid] = msg.data[0]  # type: ignore[index]
            new = mid not in self.members
            self.members[mid] = now
            if new or not self.rebalancing:
                self._rebalance()
            self.joined.add(mid)
        elif msg.kind == "c:leave" and mid in self.members:
            self._remove(mid)

    def _remove(self, mid: str) -> None:
        del self.members[mid]
        self.joined.discard(mid)
        for p in [p for p, o in self.owner.items() if o == mid]:
            del self.owner[p]
        self._rebalance()

    def _rebalance(self) -> None:
        if not self.rebalancing:
            self.rebalancing = True
            self.joined = set()

    def _complete(self) -> None:
        sc = self.sim.scenario
        self.rebalancing = False
        members = sorted(self.members)
        if not members:
            self.owner.clear()
            return
        if not sc.cooperative:  # eager round-robin: everything was revoked
            self.owner = {p: members[p % len(members)] for p in range(sc.partitions)}
        else:  # cooperative-sticky: keep what stays, withhold what moves (round one)
            quota = {m: sc.partitions // len(members) for m in members}
            for m in members[: sc.partitions % len(members)]:
                quota[m] += 1
            keep: dict[int, str] = {}
            count = dict.fromkeys(members, 0)
            for p in sorted(self.owner):
                m = self.owner[p]
                if m in count and count[m] < quota[m]:
                    keep[p] = m
                    count[m] += 1
            moving = [p for p in self.owner if p not in keep]
            free = [p for p in range(sc.partitions) if p not in self.owner]
            for p in free:
                m = min(members, key=lambda x: (count[x] - quota[x], x))
                keep[p] = m
                count[m] += 1
            self.owner = keep
            if moving:
                self._rebalance()  # their old owners revoke and rejoin: round two
        for m in members:
            slot = int(m[1 : m.index("/")])
            mine = {p for p, o in self.owner.items() if o == m}
            self._reply(slot, "assign", m, (self.epochs.get(m, 0), mine))


def random_events(scenario: Scenario, rng: random.Random) -> list[Event]:
    """A random fault schedule for ``scenario``."""
    sc = scenario
    kinds = [
        "crash",
        "restart",
        "leave",
        "pause",
        "pause",
        "cut_coord",
        "cut_produce",
        "cut_fetch",
        "wall_step",
        "broker_stall",
    ]
    out: list[Event] = []
    for _ in range(rng.randint(0, sc.max_events)):
        kind = rng.choice(kinds)
        at = rng.randrange(0, sc.duration_ms - 2000, sc.dt_ms)
        member = rng.randrange(sc.members)
        arg = 0
        frozen = False
        if kind == "pause":
            arg = rng.choice([rng.randint(1, 1500), rng.randint(1500, 3 * sc.session_ms)])
            frozen = sc.frozen_pauses and rng.random() < 0.5
        elif kind.startswith("cut_") or kind == "broker_stall":
            arg = rng.randint(100, 3 * sc.session_ms)
        elif kind == "wall_step":
            arg = rng.randint(-5 * sc.skew_ms, 5 * sc.skew_ms)
        out.append(Event(at, kind, member, arg, frozen))
        if kind in ("crash", "leave") and rng.random() < 0.7:
            out.append(Event(at + rng.randint(500, 2 * sc.session_ms), "restart", member))
    return sorted(out, key=lambda e: (e.at, e.kind, e.member))


def run_schedule(
    scenario: Scenario,
    seed: int,
    events: Sequence[Event],
    tracker_factory: TrackerFactory = LeadershipTracker,
) -> Simulation:
    """Run one schedule to its first violation (or its end)."""
    sim = Simulation(scenario, seed, events, tracker_factory)
    sim.run()
    return sim


def shrink(
    scenario: Scenario,
    seed: int,
    events: Sequence[Event],
    tracker_factory: TrackerFactory = LeadershipTracker,
) -> list[Event]:
    """Drop events (then shorten pauses and cuts) while the schedule still fails."""
    current = list(events)

    def fails(evs: list[Event]) -> bool:
        return bool(run_schedule(scenario, seed, evs, tracker_factory).violations)

    changed = True
    while changed:
        changed = False
        for i in range(len(current)):
            trial = current[:i] + current[i + 1 :]
            if fails(trial):
                current, changed = trial, True
                break
    for i in range(len(current)):
        while current[i].arg > 100 and current[i].kind in (
            "pause",
            "cut_coord",
            "cut_produce",
            "cut_fetch",
            "broker_stall",
        ):
            trial = [*current[:i], replace(current[i], arg=current[i].arg // 2), *current[i + 1 :]]
            if not fails(trial):
                break
            current = trial
    return current


def trace(scenario: Scenario, seed: int, events: Sequence[Event], sim: Simulation) -> str:
    """A replayable report of a failing schedule."""
    evs = ",\n    ".join(str(e) for e in events)
    first = sim.violations[0] if sim.violations else "none"
    return (
        f"scenario {scenario.name!r}, seed {seed}: {first}\n"
        f"replay: python -m tests.sim.replay {scenario.name} {seed} '[\n    {evs}\n]'"
    )
