"""A member's :class:`neli.takeover.Takeover` hooks, answered from its tracker."""

from __future__ import annotations

import threading
from collections.abc import Callable

from neli._clock import Clock
from neli._tracker import LeadershipTracker

__all__ = ["MemberTakeover"]


class MemberTakeover:
    """The hand-over hooks of one :class:`neli.Neli` (its ``takeover``).

    Args:
        tracker: the member's tracker.
        lock: guards ``tracker`` (shared with the poll thread).
        clock: the member's time source.
        pulse_now: asks the member to publish its heartbeats at once (after a grace period
            ended early; a no-op before start or after the loop closed).
        closed: whether the member has closed, so each call to :meth:`recovering` stands in for
            the stopped watchdog's tick.
    """

    def __init__(
        self,
        tracker: LeadershipTracker,
        lock: threading.Lock,
        clock: Clock,
        *,
        pulse_now: Callable[[], None],
        closed: Callable[[], bool],
    ) -> None:
        """A view of ``tracker``; nothing is asked yet."""
        self._tracker = tracker
        self._lock = lock
        self._clock = clock
        self._pulse_now = pulse_now
        self._closed = closed

    def in_grace(self) -> frozenset[int]:
        """See :meth:`neli.takeover.Takeover.in_grace`."""
        with self._lock:
            return self._tracker.in_grace(self._clock.monotonic(), self._clock.wall())

    def end_grace(self, partition: int) -> bool:
        """See :meth:`neli.takeover.Takeover.end_grace`."""
        with self._lock:
            ended = self._tracker.end_grace(partition, self._clock.monotonic())
        if ended:
            self._pulse_now()  # prove ownership at once instead of at the next pulse
        return ended

    def assigned_since(self, partition: int) -> float | None:
        """See :meth:`neli.takeover.Takeover.assigned_since`."""
        with self._lock:
            return self._tracker.since(partition)

    def previous_holder_silent_s(self, partition: int) -> float | None:
        """See :meth:`neli.takeover.Takeover.previous_holder_silent_s`."""
        with self._lock:
            return self._tracker.previous_holder_silent(partition, self._clock.wall())

    def recovering(self) -> bool:
        """See :meth:`neli.takeover.Takeover.recovering`."""
        clock = self._clock
        with self._lock:
            now_mono, now_wall = clock.monotonic(), clock.wall()
            if self._closed():
                # Closed: the watchdog has stopped, and each call stands in for its tick. An
                # application finishing work after close (a relay handing partitions over)
                # asks often; a gap between calls longer than stall_limit_ms counts as a
                # stall. (Answering from the stopped watchdog reported a stall stall_limit_ms
                # after close, for good: a relay stopped emitting mid hand-over.)
                self._tracker.tick(now_mono, now_wall)
            return self._tracker.recovering(now_mono, now_wall)
