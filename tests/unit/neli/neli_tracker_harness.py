"""One :class:`LeadershipTracker` driven by a :class:`ManualClock`, for the tracker tests.

Every configuration used here has T = 2 s and time only moves in binary fractions of a second
(0.25 s steps, ``EPS`` = 1/256 s), so comparisons against T are exact: "just before T" and
"at T" mean exactly that, with no float rounding on the wall clock's 1.7e9 s.
"""

from __future__ import annotations

import pytest

from neli import Mode, NeliConfig, Variant
from neli._tracker import LeadershipTracker, Transition
from neli.testing import ManualClock
from neli.wire import Heartbeat

T = 2.0
STEP = 0.25
EPS = 2.0**-8
#: In exclusive mode (see :func:`make_config`).
STALL_LIMIT = 1.0
GROUP = "g1"
ME = "me/000000000001"
OTHER = "other/000000000002"

#: The four (variant, mode) combinations, as single parameters for a ``member`` fixture.
COMBOS = [
    pytest.param((Variant.FULL, Mode.NON_EXCLUSIVE), id="full-nonexclusive"),
    pytest.param((Variant.FULL, Mode.EXCLUSIVE), id="full-exclusive"),
    pytest.param((Variant.FAST, Mode.NON_EXCLUSIVE), id="fast-nonexclusive"),
    pytest.param((Variant.FAST, Mode.EXCLUSIVE), id="fast-exclusive"),
]


def make_config(variant: Variant, mode: Mode) -> NeliConfig:
    """A valid config with T = 2 s for ``variant`` and ``mode``."""
    if mode is Mode.NON_EXCLUSIVE:
        timing = {"session_timeout_ms": 1000, "threshold_ms": 2000}  # T > S
    else:  # T + e < S
        timing = {
            "session_timeout_ms": 3000,
            "clock_skew_ms": 200,
            "threshold_ms": 2000,
            "stall_limit_ms": 1000,
        }
    return NeliConfig(
        bootstrap_servers="localhost:9092",
        group_id=GROUP,
        topic="neli",
        variant=variant,
        mode=mode,
        pulse_interval_ms=250,
        member_name="me",
        **timing,  # type: ignore[arg-type]
    )


class Member:
    """A tracker for member ``ME`` plus its clock, with helpers that mimic the runtime."""

    def __init__(self, variant: Variant, mode: Mode) -> None:
        """Create the tracker and give it its first watchdog tick, as ``Neli.start`` does."""
        self.variant = variant
        self.mode = mode
        self.config = make_config(variant, mode)
        self.clock = ManualClock()
        self.tracker = LeadershipTracker(self.config, ME)
        self.counter = 0
        self.tracker.tick(self.clock.monotonic())

    # -- time ---------------------------------------------------------------------------------

    @property
    def mono(self) -> float:
        """The current monotonic time."""
        return self.clock.monotonic()

    @property
    def wall(self) -> float:
        """The current wall time."""
        return self.clock.wall()

    def tick(self) -> None:
        """One watchdog tick now."""
        self.tracker.tick(self.mono)

    def advance(self, seconds: float, *, beat: int | None = None) -> None:
        """Move time forward in steps of at most ``STEP``, ticking after each step.

        Args:
            seconds: how far to move.
            beat: if set, a qualifying heartbeat on this partition arrives after every step.
        """
        remaining = seconds
        while remaining > 0:
            step = min(STEP, remaining)
            self.clock.advance(step)
            remaining -= step
            self.tick()
            if beat is not None:
                self.beat(beat)

    def jump(self, seconds: float) -> None:
        """Move time forward with no tick: the process was frozen for ``seconds``."""
        self.clock.advance(seconds)

    # -- inputs -------------------------------------------------------------------------------

    def assign(self, *partitions: int) -> None:
        """The group assigns ``partitions`` now."""
        self.tracker.assign(partitions, self.mono, self.wall)

    def revoke(
        self, *partitions: int, reason: str = "rebalance", release: bool = False
    ) -> list[Transition]:
        """The group takes ``partitions`` away now."""
        return self.tracker.revoke(partitions, reason, release=release)

    def heartbeat(
        self,
        partition: int,
        *,
        member_id: str | None = None,
        group: str = GROUP,
        incarnation: int | None = None,
        age: float = 0.0,
        led: tuple[int, ...] = (),
        meta: dict[str, str] | None = None,
        since: float | None = None,
    ) -> Heartbeat:
        """A heartbeat sent ``age`` seconds ago; by default one that qualifies for this variant.

        The fast variant only counts its own heartbeats of the current incarnation; full NELI
        counts anybody's, so the default sender is ``ME`` for fast and ``OTHER`` for full.
        """
        self.counter += 1
        if member_id is None:
            member_id = ME if self.variant is Variant.FAST else OTHER
        if incarnation is None:
            incarnation = (self.tracker.incarnation(partition) or 0) if member_id == ME else 0
        return Heartbeat(
            group=group,
            member_id=member_id,
            member_name=member_id.split("/", 1)[0],
            incarnation=incarnation,
            counter=self.counter,
            sent_mono=self.mono - age,
            sent_wall=self.wall - age,
            led=led,
            meta=meta or {},
            since=since,
        )

    def observe(self, partition: int, hb: Heartbeat, *, publish_wall: float | None = None) -> None:
        """``hb`` is consumed from ``partition`` now; its record timestamp is ``publish_wall``."""
        if publish_wall is None:
            publish_wall = hb.sent_wall
        self.tracker.observe(partition, hb, publish_wall, self.mono)

    def beat(self, partition: int, **kwargs: object) -> Heartbeat:
        """A qualifying heartbeat (see :meth:`heartbeat`) arrives on ``partition`` now."""
        hb = self.heartbeat(partition, **kwargs)  # type: ignore[arg-type]
        self.observe(partition, hb)
        return hb

    # -- queries ------------------------------------------------------------------------------

    def leads(self, partition: int) -> bool:
        """Whether the member leads ``partition`` now."""
        return self.tracker.leads(partition, self.mono, self.wall)

    def why_not(self, partition: int) -> str | None:
        """Why the member does not lead ``partition`` now."""
        return self.tracker.why_not(partition, self.mono, self.wall)

    def evaluate(self) -> list[Transition]:
        """Leadership transitions since the last evaluation."""
        return self.tracker.evaluate(self.mono, self.wall)

    def lead(self, partition: int) -> Transition:
        """Get ``partition`` assigned and led, the quickest way this variant allows.

        Returns:
            The ACQUIRED transition.
        """
        self.assign(partition)
        if self.mode is Mode.EXCLUSIVE:
            self.advance(T, beat=partition)  # the grace period (both variants)
        self.beat(partition)
        assert self.leads(partition), self.why_not(partition)
        (acquired,) = self.evaluate()
        return acquired

    @property
    def stale_reason(self) -> str:
        """What :meth:`why_not` says once heartbeats have gone stale."""
        return "own heartbeat not returned" if self.variant is Variant.FAST else "heartbeats stale"
