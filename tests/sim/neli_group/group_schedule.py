"""What the group simulation runs: a scenario (the group's timing and shape) and a schedule of
fault events, hand-written or drawn at random from a seed.

A schedule is a seed plus a list of :class:`Event`; the same seed also draws the simulation's
delays, so a schedule replays exactly (:mod:`tests.sim.neli_group.groupsim` runs it).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from neli import Mode, NeliConfig, Variant


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
    #: A coordinator resuming after a stall expires the members whose last group heartbeat is
    #: S old before it reads the requests queued during the stall, rather than after (a paused
    #: broker may do either: then every member rejoins as a new one and the partitions move).
    stall_expires_first: bool = False

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
