"""Warnings that a flood cannot turn into a flood of log lines.

A hostile or broken input can repeat the same problem thousands of times a second (a new
instrument name per record, say). :class:`RateLimitedWarnings` logs the first warning of each
*kind* at once, then at most one per interval; the ones in between are counted and the next
warning says how many there were. Kinds are a small fixed set chosen by the caller (never an
instrument name), so the state here is bounded too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RateLimitedWarnings"]


class RateLimitedWarnings:
    """At most one warning of each kind per ``interval_s`` (see the module docstring).

    Args:
        logger: where the warnings go.
        interval_s: the least time between two warnings of one kind.
        clock: monotonic seconds (tests inject one).
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """No warning yet."""
        self._log = logger
        self._interval_s = interval_s
        self._clock = clock
        self._next: dict[str, float] = {}
        #: kind -> warnings held back since the last one of that kind was logged.
        self.suppressed: dict[str, int] = {}

    def warn(self, kind: str, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless a warning of ``kind`` was logged less than the interval
        ago (then count it); returns whether it was logged."""
        now = self._clock()
        if now < self._next.get(kind, float("-inf")):
            self.suppressed[kind] = self.suppressed.get(kind, 0) + 1
            return False
        self._next[kind] = now + self._interval_s
        held = self.suppressed.pop(kind, 0)
        if held:
            self._log.warning(
                msg + " (and %d more like it since the last such warning)", *args, held
            )
        else:
            self._log.warning(msg, *args)
        return True
