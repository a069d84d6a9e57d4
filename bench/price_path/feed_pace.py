"""The figures of ``bench/price_path/feed_rate.py``, from samples (pure functions, tested alone).

A step is watched by sampling, every ``interval_s``, the number of records on the quotes topic
(the sum of the partitions' high watermarks: the topic is fresh, and the feed's idempotent,
non-transactional producer writes no control records, so an offset is a record) and the CPU
seconds of the producing process (``/proc/<pid>/stat``). A :class:`Sample` holds one reading.

* **pace**: the first sample with at least one record (``t_first``, ``c_first`` records then)
  and the first with all ``n`` (``t_last``). The feed's schedule is absolute (quote i at
  start + i / R), so from ``t_first`` on the remaining ``n - c_first`` quotes are due within
  ``(n - c_first) / R``; ``achieved`` is the rate at which they landed, and
  ``behind_schedule_at_end_s`` how much later than due the last one landed (<= 0: on time).
  The resolution is the sampling interval. Quotes held back at the start (the producer
  acquiring its idempotence id) and landed in one burst count from the burst's sample; the
  feed's own start is not visible from the broker, so a hold-up that spans samples makes the
  lateness look smaller by up to its length (well under a second; a step lasts ``--step-s``).
* **delivered rate**: records per second over the steady window, from the first sample at
  least ``warm_s`` after ``t_first`` to ``t_last`` (the feed's start-up left out).
* **CPU**: the producing process's CPU seconds over the same window (the samples at or inside
  its ends), per record landed in it and as a share of one core.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: A step paces R if what landed came at >= this fraction of R ...
PACED_FRACTION = 0.95
#: ... and its last quote landed at most this late against the schedule.
PACED_LATE_S = 0.5


@dataclass(frozen=True)
class Sample:
    """One reading: monotonic time, records on the topic, CPU seconds of each watched process
    (a process that has exited is missing), CPU seconds of each thread of the producer."""

    t: float
    records: int
    cpu_s: dict[str, float] = field(default_factory=dict)
    threads_cpu_s: dict[str, float] = field(default_factory=dict)


def first_reaching(samples: Sequence[Sample], n: int) -> Sample | None:
    """The first sample with at least ``n`` records (counts never fall), or ``None``."""
    i = bisect.bisect_left([s.records for s in samples], n)
    return samples[i] if i < len(samples) else None


def _inside(samples: Sequence[Sample], lo: float, hi: float, name: str) -> list[Sample]:
    return [s for s in samples if lo <= s.t <= hi and name in s.cpu_s]


def cpu_over(samples: Sequence[Sample], name: str, lo: float, hi: float) -> dict[str, float | None]:
    """CPU of process ``name`` over the samples in [lo, hi]: per record landed meanwhile (µs)
    and as a share of one core (%); ``None`` where fewer than two samples saw it."""
    inside = _inside(samples, lo, hi, name)
    if len(inside) < 2:
        return {"cpu_s": None, "cpu_us_per_record": None, "cpu_percent_of_a_core": None}
    a, b = inside[0], inside[-1]
    seconds = b.cpu_s[name] - a.cpu_s[name]
    records = b.records - a.records
    return {
        "cpu_s": round(seconds, 3),
        "cpu_us_per_record": round(seconds / records * 1e6, 2) if records > 0 else None,
        "cpu_percent_of_a_core": round(seconds / (b.t - a.t) * 100, 1) if b.t > a.t else None,
    }


def threads_over(samples: Sequence[Sample], lo: float, hi: float, top: int = 6) -> dict[str, float]:
    """Each thread's share of a core (%) over [lo, hi], the busiest ``top`` threads."""
    inside = [s for s in samples if lo <= s.t <= hi and s.threads_cpu_s]
    if len(inside) < 2 or inside[-1].t <= inside[0].t:
        return {}
    a, b = inside[0], inside[-1]
    span = b.t - a.t
    shares = {
        name: round((b.threads_cpu_s[name] - a.threads_cpu_s.get(name, 0.0)) / span * 100, 1)
        for name in b.threads_cpu_s
    }
    return dict(sorted(shares.items(), key=lambda kv: -kv[1])[:top])


def step_figures(
    samples: Sequence[Sample],
    *,
    n: int,
    offered_per_s: float | None,
    started: float,
    warm_s: float,
    process: str,
) -> dict[str, Any]:
    """The figures of one step (see the module docstring); ``offered_per_s`` None: unpaced."""
    first, last = first_reaching(samples, 1), first_reaching(samples, n)
    out: dict[str, Any] = {
        "offered_per_s": offered_per_s,
        "records": n,
        "landed": samples[-1].records if samples else 0,
        "complete": last is not None,
    }
    if first is None or last is None or last.t <= first.t:
        out["paced"] = False if offered_per_s else None
        return out
    lo, hi = first.t + warm_s, last.t
    if hi - lo < 1.0:  # a step too short for a steady window: the whole landing time
        lo = first.t
    at_lo = next(s for s in samples if s.t >= lo)  # exists: ``last`` is at or after lo
    out["first_landed_after_start_s"] = round(first.t - started, 2)
    out["last_landed_after_start_s"] = round(last.t - started, 2)
    span = last.t - at_lo.t
    out["delivered_per_s"] = round((n - at_lo.records) / span) if span > 0 else None
    out["steady_window_s"] = round(hi - lo, 2)
    out["cpu"] = cpu_over(samples, process, lo, hi)
    out["threads_percent_of_a_core"] = threads_over(samples, lo, hi)
    if offered_per_s:
        due = (n - first.records) / offered_per_s
        took = last.t - first.t
        achieved = (n - first.records) / took
        out["achieved_over_offered"] = round(achieved / offered_per_s, 3)
        out["behind_schedule_at_end_s"] = round(took - due, 3)
        out["behind_schedule_at_end_quotes"] = max(0, round((took - due) * offered_per_s))
        out["paced"] = achieved >= PACED_FRACTION * offered_per_s and took - due <= PACED_LATE_S
    share = out["cpu"]["cpu_percent_of_a_core"]
    out["within_one_core"] = None if share is None else share <= 100.0
    return out


def headline(steps: Sequence[dict[str, Any]], goal_per_s: float) -> dict[str, Any]:
    """The highest offered rate paced within one core, and whether ``goal_per_s`` was."""
    held = [
        s["offered_per_s"]
        for s in steps
        if s.get("offered_per_s") and s.get("paced") and s.get("within_one_core")
    ]
    best = max(held, default=None)
    return {
        "highest_paced_on_one_core_per_s": best,
        "goal_per_s": goal_per_s,
        "goal_met": best is not None and best >= goal_per_s,
    }
