"""Group-wide NELI invariants over thousands of seeded random schedules (see the package doc)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from dataclasses import replace

import pytest

from neli import NeliConfig
from neli._tracker import LeadershipTracker, Transition
from tests.sim.neli_group.group_schedule import Event, Scenario, random_events
from tests.sim.neli_group.groupsim import Simulation, TrackerFactory, run_schedule, shrink, trace
from tests.sim.neli_group.replay import parse_events
from tests.sim.neli_group.scenarios import PUBLISHERS, RELAY, SCENARIOS

SCHEDULES = int(os.environ.get("NELI_SIM_SCHEDULES", "100"))
SLOW_SCHEDULES = int(os.environ.get("NELI_SIM_SLOW_SCHEDULES", "2000"))
SEED0 = int(os.environ.get("NELI_SIM_SEED", "0"))


def first_failure(
    scenario: Scenario,
    seeds: range,
    tracker_factory: TrackerFactory = LeadershipTracker,
) -> tuple[int, list[Event]] | None:
    """The first seed whose random schedule breaks an invariant, with its events."""
    for seed in seeds:
        events = random_events(scenario, random.Random(seed))
        if run_schedule(scenario, seed, events, tracker_factory).violations:
            return seed, events
    return None


def report(scenario: Scenario, seed: int, events: list[Event], factory: TrackerFactory) -> str:
    """Shrink a failing schedule and describe it so that it can be replayed."""
    small = shrink(scenario, seed, events, factory)
    return trace(scenario, seed, small, run_schedule(scenario, seed, small, factory))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_invariants_hold(name: str) -> None:
    """Every random schedule keeps the scenario's invariant (a shrunk trace if one does not)."""
    _check_schedules(name, range(SEED0, SEED0 + SCHEDULES))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_invariants_hold_over_many_more_schedules(name: str) -> None:
    """The same invariant over the schedules after the default run's (the slow suite's share:
    the default run keeps to 100 per scenario for CI's time)."""
    first = SEED0 + SCHEDULES
    _check_schedules(name, range(first, first + SLOW_SCHEDULES))


def _check_schedules(name: str, seeds: range) -> None:
    scenario = SCENARIOS[name]
    failure = first_failure(scenario, seeds)
    if failure is not None:
        pytest.fail(report(scenario, *failure, LeadershipTracker))


@pytest.mark.parametrize("scenario", [PUBLISHERS, RELAY], ids=lambda s: s.name)
def test_members_do_lead(scenario: Scenario) -> None:
    """Without faults every partition is led nearly all the time (the checks are not vacuous)."""
    sim = run_schedule(scenario, 1, [])
    assert not sim.violations
    # Exclusive members wait a grace period T after the initial assignment; non-exclusive ones
    # lead once a heartbeat on the partition comes back, up to a pulse (1 s for the publishers)
    # plus delivery after each assignment: a lone group here has no other group's heartbeats
    # on the shared topic to see sooner.
    floor = 0.9 if scenario.threshold_ms > scenario.session_ms else 0.75
    assert sim.led_checks / sim.checks > floor


class NoGraceTracker(LeadershipTracker):
    """A wrong rule: a new assignment may lead at once (no grace period)."""

    def assign(
        self, partitions: Iterable[int], now_mono: float, now_wall: float | None = None
    ) -> None:
        """Assign, then backdate new slots so that their grace period is already over."""
        before = set(self._slots)
        super().assign(partitions, now_mono, now_wall)
        for p, slot in self._slots.items():
            if p not in before:
                slot.assigned_mono = now_mono - self._t


class HastyGraceTracker(LeadershipTracker):
    """A wrong rule: the fast variant's grace period ends on the previous holder's last
    heartbeat however recent it is (the evidence without its T + e bound)."""

    def __init__(self, config: NeliConfig, member_id: str) -> None:
        """A tracker whose evidence threshold T + e is zero."""
        super().__init__(config, member_id)
        self._e = -self._t


class NoReleaseTracker(LeadershipTracker):
    """A wrong rule: non-exclusive revocation ends leadership at once (no release)."""

    def revoke(
        self, partitions: Iterable[int], reason: str, *, release: bool = False, lost: bool = False
    ) -> list[Transition]:
        """Revoke as exclusive mode does, whatever ``release`` says."""
        del release
        return super().revoke(partitions, reason, release=False, lost=lost)


@pytest.mark.parametrize(
    ("name", "factory"),
    [
        ("relay-default", NoGraceTracker),
        ("relay-default", HastyGraceTracker),
        ("full-exclusive-lib", NoGraceTracker),
        ("publishers-default", NoReleaseTracker),
        ("publishers-eager", NoReleaseTracker),
    ],
)
def test_checker_catches_a_wrong_rule(name: str, factory: TrackerFactory) -> None:
    """A tracker with a rule removed breaks the invariant, and the shrunk trace still fails."""
    scenario = SCENARIOS[name]
    failure = first_failure(scenario, range(300), factory)
    assert failure is not None, f"{name}: no schedule caught {factory.__name__}"
    seed, events = failure
    small = shrink(scenario, seed, events, factory)
    assert len(small) <= len(events)
    assert run_schedule(scenario, seed, small, factory).violations
    assert not run_schedule(scenario, seed, small).violations  # the rule is to blame


def test_a_frozen_monotonic_clock_needs_the_wall_clock_stall_guard() -> None:
    """A pause during which the monotonic clock stands still is caught by the wall clock.

    Without the wall-clock half of the stall guard, exclusive mode would rely on a monotonic
    clock that runs through pauses: one frozen pause longer than S is enough for a member to
    wake, ask, and still lead next to its successor.
    """
    frozen = [Event(10_250, "pause", 2, 5261, frozen=True)]
    relay = replace(RELAY, frozen_pauses=True)
    assert run_schedule(replace(relay, wall_stall_guard=False), 8, frozen).violations
    assert not run_schedule(relay, 8, frozen).violations
    for base in (RELAY, SCENARIOS["full-exclusive-lib"]):
        scenario = replace(base, frozen_pauses=True, wall_stall_guard=False)
        assert first_failure(scenario, range(300)) is not None, base.name
        assert first_failure(replace(base, frozen_pauses=True), range(300)) is None, base.name


def test_replay_is_deterministic() -> None:
    """The same seed and events give the same run (a printed trace replays exactly)."""
    scenario = PUBLISHERS
    events = random_events(scenario, random.Random(5))
    one, two = run_schedule(scenario, 5, events), run_schedule(scenario, 5, events)
    assert (one.checks, one.led_checks, one.coord.owner) == (
        two.checks,
        two.led_checks,
        two.coord.owner,
    )


def test_printed_trace_parses_back() -> None:
    """The event list a failure prints is what the replay tool reads back."""
    events = [Event(25, "cut_fetch", 0, 6443), Event(10_250, "pause", 2, 5261, frozen=True)]
    sim = run_schedule(RELAY, 8, events)
    text = trace(RELAY, 8, events, sim)
    printed = text[text.index("'[") + 1 : text.rindex("]'") + 1]
    assert parse_events(printed) == events


def _unled_ms_after(scenario: Scenario, events: list[Event], since_ms: int) -> int:
    """Simulated ms after ``since_ms`` during which some partition had no leader."""
    sim = Simulation(scenario, 3, events)
    unled = [0]

    def watch() -> None:
        running = [p for p in sim.procs.values() if p.running(sim.now)]
        if sim.now >= since_ms and any(
            not any(p.leads(part, sim.now) for p in running) for part in range(scenario.partitions)
        ):
            unled[0] += scenario.dt_ms

    sim.on_step = watch
    sim.run()
    assert not sim.violations, [str(v) for v in sim.violations]
    return unled[0]


@pytest.mark.parametrize("stall_s", [1, 2, 4])
def test_a_broker_stall_never_leaves_a_publisher_partition_unled(stall_s: int) -> None:
    """The common-mode failure of the two publishing groups: their shared broker stalls.

    With the publishers' default (keep leading when isolated), a stall of 1, 2 or 4·S leaves
    no partition without a leader at any instant; with it off, the same stall of 2·S does (every
    member's session is lost at once, and each must rejoin and be assigned before it leads).
    """
    scenario = replace(PUBLISHERS, duration_ms=40_000)
    stall = [Event(8_000, "broker_stall", 0, stall_s * scenario.session_ms)]
    assert _unled_ms_after(scenario, stall, 6_000) == 0
    if stall_s == 2:
        assert _unled_ms_after(replace(scenario, keep_leading=False), stall, 6_000) > 0


@pytest.mark.parametrize("expires_first", [False, True], ids=["reads-first", "expires-first"])
@pytest.mark.parametrize("gap_ms", range(250, 9_001, 250))
def test_a_second_broker_stall_during_the_regrouping_leaves_no_partition_unled(
    gap_ms: int, expires_first: bool
) -> None:
    """A second stall of 2·S comes while the group re-forms after a first of S (hand-overs
    under way, a member's last heartbeat naming a partition it has just handed over not yet
    read): still no partition without a leader at any instant (the member that has just taken a
    partition over must not give it up on its predecessor's claims)."""
    scenario = replace(PUBLISHERS, duration_ms=45_000, stall_expires_first=expires_first)
    s = scenario.session_ms
    stalls = [
        Event(8_000, "broker_stall", 0, s),
        Event(8_000 + s + gap_ms, "broker_stall", 0, 2 * s),
    ]
    assert _unled_ms_after(scenario, stalls, 6_000) == 0
