"""Time sources, injected so that unit tests can drive time deterministically.

Two clocks matter to NELI. Deadlines and freshness of our *own* observations use the
monotonic clock (immune to wall-clock steps). Exclusive mode compares the *publish timestamps*
other processes put on heartbeats with our wall clock; the bound on the skew between any two
wall clocks is ``NeliConfig.clock_skew_ms``.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of monotonic and wall-clock time, both in seconds."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (system-wide on Linux)."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch, comparable with Kafka record timestamps."""
        ...


class SystemClock:
    """The real clocks: :func:`time.monotonic` and :func:`time.time`."""

    def monotonic(self) -> float:
        """Return :func:`time.monotonic`."""
        return time.monotonic()

    def wall(self) -> float:
        """Return :func:`time.time`."""
        return time.time()


SYSTEM_CLOCK = SystemClock()
