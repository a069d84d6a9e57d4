"""The time sources a member runs on: :class:`Clock`, and the real one, :data:`SYSTEM_CLOCK`.

:class:`neli.Neli` takes a ``clock`` argument so that tests can drive time deterministically
(:class:`neli.testing.ManualClock` is one). Deadlines and freshness of a member's own
observations use the monotonic clock; exclusive mode compares other members' heartbeat
timestamps with the wall clock, within ``NeliConfig.clock_skew_ms``.
"""

from __future__ import annotations

from neli._clock import SYSTEM_CLOCK, Clock, SystemClock

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]
