"""The stall guard: whether this process was paused long enough that its group may have moved on.

Exclusive mode stops trusting leadership, on every partition at once, whenever this process has
stalled (was paused, or its event loop was starved) for longer than ``stall_limit_ms``, and
until S + 0.5 s (at least T) after it runs again: while paused its session may have expired and
the partition been given away, and records fetched under the stale assignment could otherwise
make it look fresh; and where the pause stopped the monotonic clock, librdkafka (which times the
session on that clock) may believe in its session for up to S after the pause, with the group
coordinator out of reach to tell it otherwise. A stall is a gap between watchdog ticks on the
monotonic *or* the wall clock (some VM pauses stop the monotonic clock). This guard is what
goNELI lacks.

Pure like :mod:`neli._tracker`, which consults it: no I/O, time passed in by the caller.
"""

from __future__ import annotations

from neli._config import NeliConfig

#: How long librdkafka may take to act on an expired session once its timer says so (its
#: check runs periodically, so it reports a lost session somewhat after S).
_LOST_NOTICE_S = 0.5


class StallGuard:
    """Watchdog ticks of one process, and the stalls their gaps reveal (not thread-safe)."""

    def __init__(self, config: NeliConfig) -> None:
        """Create a guard with ``config``'s T, S and ``stall_limit_ms``; it has not ticked yet."""
        assert config.threshold_ms is not None
        assert config.stall_limit_ms is not None
        self._limit = config.stall_limit_ms / 1000.0
        # How long a member that stalled stays suspect once it runs again: until its consumer
        # would have noticed a lost session. librdkafka times a session on the monotonic
        # clock, which some VM pauses stop, so after such a pause it may still believe in its
        # session for up to S; and its check runs on a timer (+ _LOST_NOTICE_S). At least T.
        self._suspend = max(
            config.threshold_ms / 1000.0, config.session_timeout_ms / 1000.0 + _LOST_NOTICE_S
        )
        self._last_tick: float | None = None
        self._last_tick_wall: float | None = None
        self._suspect_until = 0.0
        #: How many stalls longer than the limit were detected.
        self.stalls = 0

    def tick(self, now_mono: float, now_wall: float | None = None) -> None:
        """Watchdog tick, called often (every ``check_interval_ms``) by the runtime.

        A gap since the last tick longer than ``stall_limit_ms`` on either clock is a stall:
        the wall clock catches a pause during which the monotonic clock stood still (some VM
        freezes), at the price of a false alarm when the wall clock is stepped forward.
        """
        last, last_wall, limit = self._last_tick, self._last_tick_wall, self._limit
        if (last is not None and now_mono - last > limit) or (
            last_wall is not None and now_wall is not None and now_wall - last_wall > limit
        ):
            self.stalls += 1
            self._suspect_until = now_mono + self._suspend
        self._last_tick = now_mono
        if now_wall is not None:
            self._last_tick_wall = now_wall

    def reason(self, now_mono: float, now_wall: float) -> str | None:
        """Why a stall holds this member off now, or ``None``.

        Not ticked within the limit (or never) is a stall still going on; after one, the
        member stays suspect for S + 0.5 s (at least T).
        """
        if self._last_tick is None or now_mono - self._last_tick > self._limit:
            return "stalled"
        wall_tick = self._last_tick_wall
        if wall_tick is not None and now_wall - wall_tick > self._limit:
            return "stalled"
        if now_mono < self._suspect_until:
            return "recovering from a stall"
        return None
