"""The relay simulation's clock: simulated time in place of the ``time`` module and of the
standby tails' condition variables.

* :class:`SimTime` replaces the ``time`` module inside the relay's modules. ``monotonic`` is
  the simulated clock; ``sleep`` advances it and lets every standby tail read (the tails are
  threads of their own in production, so they make progress while a worker sleeps).
* :class:`PumpCondition` replaces each standby tail's condition variable: a worker waiting in
  ``snapshot_at`` advances the clock by its wait and lets the tails read, instead of blocking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.relay_world import World


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
