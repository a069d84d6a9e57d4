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
schedule replays exactly. See ``tests/sim/neli_group/__init__.py`` for the invariants and
assumptions.

The parts live in their own modules: the scenario and the fault events in
:mod:`tests.sim.neli_group.group_schedule`, a member process (its clocks and the runtime's loops) in
:mod:`tests.sim.neli_group.group_member`, the group coordinator in
:mod:`tests.sim.neli_group.group_coordinator`.
This module holds the world they share (true time, the NELI topic, the faults) and the
invariant checks, and runs, shrinks and reports schedules.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from neli import Mode, NeliConfig, Variant
from neli._tracker import LeadershipTracker
from tests.sim.neli_group.group_coordinator import Coordinator, Message
from tests.sim.neli_group.group_member import MemberProcess, Record
from tests.sim.neli_group.group_schedule import FAULTS, Event, Scenario

TrackerFactory = Callable[[NeliConfig, str], LeadershipTracker]


@dataclass
class Violation:
    """An invariant broken at true time ``at``."""

    at: int
    partition: int
    what: str

    def __str__(self) -> str:
        return f"t={self.at} ms, partition {self.partition}: {self.what}"


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
        self.procs: dict[int, MemberProcess] = {}
        self.incarnations = [0] * scenario.members
        self.log: list[list[Record]] = [[] for _ in range(scenario.partitions)]
        #: The group's committed position per partition (an index into its log).
        self.committed: list[int | None] = [None] * scenario.partitions
        #: Fast exclusive: owners commit the position of their own latest heartbeat (so that
        #: the next owner reads it: the evidence of ``neli._tracker``), not what they read.
        self.store_own = scenario.variant is Variant.FAST and scenario.mode is Mode.EXCLUSIVE
        self.cut: dict[tuple[str, int], int] = {}  # (kind, slot) -> until
        self.stalled_until = -1  # the coordinator answers nobody until then
        self.coord = Coordinator(self)
        #: (start, end-or-None) of each fault window (see tests/sim/neli_group/__init__.py).
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
        msg = Message(at, self.seq, kind, member_id, data)
        if kind.startswith("c:"):
            bisect.insort(self.coord.inbox, msg)
        else:
            proc = self.proc_by_id(member_id)
            if proc is not None:
                bisect.insort(proc.inbox, msg)

    def proc_by_id(self, member_id: str) -> MemberProcess | None:
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
                    proc.step()
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
        proc = MemberProcess(self, slot, self.incarnations[slot], self.now)
        self.procs[slot] = proc
        proc.join()

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

    def _apply_to(self, proc: MemberProcess, ev: Event) -> None:
        if ev.kind == "crash":
            proc.alive = False
        elif ev.kind == "leave":
            proc.leave()
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

    # -- the NELI topic --------------------------------------------------------------------------

    def append(self, p: int, rec: Record) -> None:
        """A member's heartbeat reaches partition ``p`` of the NELI topic at ``rec.append_at``."""
        log = self.log[p]
        i = len(log)
        while i > 0 and log[i - 1].append_at > rec.append_at:
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
        f"replay: python -m tests.sim.neli_group.replay {scenario.name} {seed} '[\n    {evs}\n]'"
    )
