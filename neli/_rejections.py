"""Heartbeats a reader refused: counted by reason, warned about at a bounded rate.

Anyone who may write the NELI topic can flood it with records that are not heartbeats, or
heartbeats that lie in ways a reader can detect (:mod:`neli._heartbeat_check`,
:mod:`neli._tracker`). Each such record is dropped, counted under its reason (a small fixed set,
safe as a metric label) and reported by a warning; while records keep being refused, at most one
warning per ``interval_s`` is logged, and it says how many were refused since the last one. A
flood therefore costs a counter increment per record, never a log line per record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

log = logging.getLogger("neli")

#: Seconds between two warnings about refused heartbeats (the first is logged at once).
WARN_INTERVAL_S = 10.0


class Rejections:
    """Refused heartbeats of one reader (thread-safe: counted in the poll thread, read anywhere).

    Args:
        name: who refuses, for the warnings (e.g. the member's group).
        monotonic: the reader's monotonic clock (it paces the warnings).
        interval_s: at most one warning per this many seconds.
    """

    def __init__(
        self,
        name: str,
        monotonic: Callable[[], float] = time.monotonic,
        *,
        interval_s: float = WARN_INTERVAL_S,
    ) -> None:
        """Nothing refused yet."""
        self._monotonic = monotonic
        self._name = name
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._by_reason: dict[str, int] = {}
        self._total = 0
        self._warned_mono: float | None = None
        self._unwarned = 0  # refused since the last warning

    @property
    def total(self) -> int:
        """How many heartbeats were refused."""
        with self._lock:
            return self._total

    def by_reason(self) -> Mapping[str, int]:
        """How many heartbeats were refused, per reason (a snapshot)."""
        with self._lock:
            return MappingProxyType(dict(self._by_reason))

    def refuse(self, reason: str, where: str, detail: str) -> None:
        """Count one refused record and warn, unless a warning was logged recently.

        Args:
            reason: the short reason (:attr:`neli.wire.HeartbeatDecodeError.reason`).
            where: where the record was read, e.g. ``"pricing.neli[3]@1234"``.
            detail: what was wrong with it (bounded by the caller).
        """
        now = self._monotonic()
        with self._lock:
            self._total += 1
            self._by_reason[reason] = self._by_reason.get(reason, 0) + 1
            self._unwarned += 1
            if self._warned_mono is not None and now - self._warned_mono < self._interval_s:
                return
            self._warned_mono, count, self._unwarned = now, self._unwarned, 0
            total = self._total
        log.warning(
            "neli %s refused %d heartbeat(s) since the last warning (%d in all), latest at %s: %s",
            self._name,
            count,
            total,
            where,
            detail,
        )
