"""Rate-limited log lines: what a consuming loop says about bad records it skips.

One bad record is worth a line; a flood of them (a buggy upstream, an attacker with write
access) must not become a flood of lines that fills the disk and hides everything else. A
:class:`RateLimitedLog` writes at most one line per ``interval_s`` and says in the next line it
writes how many it held back meanwhile; its counters say how many there were in all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """At most one line per ``interval_s`` on ``logger``; the others are counted.

    Not thread-safe: one per thread that logs (each consuming loop has its own).

    Args:
        logger: where the lines go.
        interval_s: at least this long between two lines.
        level: the lines' level.
        clock: a monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval_s: float = 10.0,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Nothing logged yet: the first line goes out at once."""
        self._logger = logger
        self._interval_s = interval_s
        self._level = level
        self._clock = clock
        self._last = float("-inf")
        #: Lines held back since the last one written.
        self.suppressed = 0
        #: Lines asked for in all (written or not).
        self.count = 0

    def __call__(self, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless a line went out less than ``interval_s`` ago; return
        whether it was written."""
        self.count += 1
        now = self._clock()
        if now - self._last < self._interval_s:
            self.suppressed += 1
            return False
        if self.suppressed:
            msg += " (and %d more like it in the last %.0f s)"
            args = (*args, self.suppressed, now - self._last)
        self._logger.log(self._level, msg, *args)
        self._last = now
        self.suppressed = 0
        return True
