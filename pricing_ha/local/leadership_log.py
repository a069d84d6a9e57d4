"""Reading the leadership records written by :mod:`pricing_ha.local.probe`.

A *run* is an interval during which a member's samples all said it led a partition, from the
first sample that said so to the last one. A member paused (SIGSTOP) takes no samples, so a pause
ends its runs; a killed member's runs end at its last record. The checks below compare the runs
of several processes on the shared monotonic clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

Interval = tuple[float, float]


@dataclass
class MemberLog:
    """What one member recorded."""

    name: str
    runs: dict[int, list[Interval]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[Interval] = field(default_factory=list)
    first_seen: float | None = None
    last_seen: float | None = None

    def led_at(self, partition: int, t: float) -> bool:
        """Whether a run of ``partition`` contains instant ``t``."""
        return any(a <= t <= b for a, b in self.runs.get(partition, ()))

    def partitions(self) -> set[int]:
        """Every partition this member ever led."""
        return {p for p, runs in self.runs.items() if runs}


def load(path: Path, name: str | None = None) -> MemberLog:  # noqa: PLR0912 - one flat dispatch
    """Parse one probe file (a torn last line from a killed process is ignored)."""
    log = MemberLog(name or path.stem)
    open_runs: dict[int, float] = {}

    def close(p: int, end: float) -> None:
        start = open_runs.pop(p)
        log.runs.setdefault(p, []).append((start, max(start, end)))

    if not path.exists():
        return log
    for line in path.read_bytes().splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        t = float(rec["t"])
        kind = rec["k"]
        if log.first_seen is None:
            log.first_seen = t
        log.last_seen = max(t, log.last_seen or t)
        if kind == "led":
            now = set(rec["led"])
            for p in [p for p in open_runs if p not in now]:
                close(p, float(rec["prev"]))
            for p in now - set(open_runs):
                open_runs[p] = t
        elif kind == "gap":
            until = float(rec["until"])
            log.gaps.append((t, until))
            log.last_seen = max(until, log.last_seen)
            for p in list(open_runs):
                close(p, t)
        elif kind == "end":
            for p in list(open_runs):
                close(p, t)
        elif kind == "event":
            log.events.append(rec)
    for p in list(open_runs):
        close(p, log.last_seen or open_runs[p])
    return log


def overlaps(logs: Iterable[MemberLog], partition: int) -> list[tuple[str, str, Interval]]:
    """Instants at which two members led ``partition`` at once: ``(a, b, (start, end))``."""
    members = list(logs)
    out: list[tuple[str, str, Interval]] = []
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            for a0, a1 in a.runs.get(partition, ()):
                for b0, b1 in b.runs.get(partition, ()):
                    lo, hi = max(a0, b0), min(a1, b1)
                    if lo <= hi:
                        out.append((a.name, b.name, (lo, hi)))
    return out


def uncovered(
    logs: Iterable[MemberLog], partition: int, start: float, end: float, tolerance: float = 0.05
) -> list[Interval]:
    """Sub-intervals of ``[start, end]`` longer than ``tolerance`` with no leader of ``partition``.

    Samples are taken every few milliseconds, so a hand-over between two members shows a gap of
    one sampling period even when there was none; ``tolerance`` absorbs that.
    """
    runs = sorted(r for log in logs for r in log.runs.get(partition, ()))
    holes: list[Interval] = []
    cursor = start
    for a, b in runs:
        if b < cursor:
            continue
        if a > cursor:
            hole_end = min(a, end)
            if hole_end - cursor > tolerance:
                holes.append((cursor, hole_end))
        cursor = max(cursor, b)
        if cursor >= end:
            break
    if end - cursor > tolerance:
        holes.append((cursor, end))
    return holes


def first_led_after(logs: Iterable[MemberLog], partition: int, t: float) -> float | None:
    """The earliest instant at or after ``t`` at which any of ``logs`` led ``partition``."""
    best: float | None = None
    for log in logs:
        for a, b in log.runs.get(partition, ()):
            if b >= t:
                cand = max(a, t)
                best = cand if best is None else min(best, cand)
    return best
