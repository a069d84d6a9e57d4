"""What one run of the publish-silence benchmark says, from its records: each (instrument, seq)'s
first publication on the union or in one group, the gaps between consecutive seqs, the resume
delays after a broker pause, and the run's figures against the feed.
"""

from __future__ import annotations

import statistics
from typing import Any

import orjson

from pricing_ha.local.cluster import Record, missing

Pairs = dict[tuple[str, int], int]  # (instrument, seq) -> ns


def first_publications(records: list[Record], group: str | None = None) -> Pairs:
    """The first publication time of each (instrument, seq), of ``group`` or of the union."""
    out: Pairs = {}
    for r in records:
        if r.key is None or (group is not None and r.headers.get("group") != group):
            continue
        k = (r.key.decode(), int(r.headers["seq"]))
        ns = int(r.headers["publish_ns"])
        out[k] = min(out.get(k, ns), ns)
    return out


def gaps_between(first: Pairs, lo_ns: float, hi_ns: float) -> dict[tuple[str, int], float]:
    """(instrument, seq) -> seconds until seq + 1's first publication, for pairs in a window.

    A pair counts when seq + 1 was first published in ``[lo_ns, hi_ns]``.
    """
    out: dict[tuple[str, int], float] = {}
    for (instrument, seq), ns in first.items():
        nxt = first.get((instrument, seq + 1))
        if nxt is not None and lo_ns <= nxt <= hi_ns:
            out[(instrument, seq)] = (nxt - ns) / 1e9
    return out


def worst_per_instrument(gaps: dict[tuple[str, int], float]) -> dict[str, float]:
    """Instrument -> its longest gap among ``gaps``."""
    out: dict[str, float] = {}
    for (instrument, _), g in gaps.items():
        out[instrument] = max(out.get(instrument, 0.0), g)
    return out


def _resume_delays(first: Pairs, instruments: list[str], resume_ns: int) -> dict[str, float | None]:
    """Instrument -> seconds from ``resume_ns`` to its first seq first published after it.

    ``first`` holds first publications, so a seq already published before ``resume_ns`` (e.g.
    from quotes fetched before the pause) does not count; None: nothing new after ``resume_ns``.
    """
    after: dict[str, int] = {}
    for (instrument, _), ns in first.items():
        if ns >= resume_ns and ns < after.get(instrument, 2**63):
            after[instrument] = ns
    return {i: round((after[i] - resume_ns) / 1e9, 4) if i in after else None for i in instruments}


def resume_figures(
    raw: list[Record], instruments: list[str], resume_ns: int, groups: dict[str, str]
) -> dict[str, Any]:
    """Resume delay on the union (worst and median instrument) and in each group alone."""
    union = _resume_delays(first_publications(raw), instruments, resume_ns)
    known = {i: d for i, d in union.items() if d is not None}
    per_group: dict[str, float | None] = {}  # worst instrument; None if one had nothing new
    for name, group in groups.items():
        own = _resume_delays(first_publications(raw, group), instruments, resume_ns)
        got = [d for d in own.values() if d is not None]
        per_group[name] = max(got) if got and len(got) == len(own) else None
    silent = sorted(i for i, d in union.items() if d is None)
    return {
        # Worst instrument; None if an instrument published nothing new after the SIGCONT.
        "resume_delay_s": max(known.values()) if known and not silent else None,
        "resume_delay_instrument": max(known, key=lambda i: known[i]) if known else None,
        "resume_delay_median_instrument_s": (
            round(statistics.median(known.values()), 4) if known else None
        ),
        "instruments_silent_after_resume": silent,
        "resume_delay_by_group_s": per_group,
    }


def judge_run(
    raw: list[Record],
    quotes: list[Record],
    expected: dict[str, int],
    times: tuple[int, int, int],
) -> dict[str, Any]:
    """The figures of one run, from the data (``times``: settled, fault and feed stop, ns)."""
    settled_ns, kill_ns, stop_ns = times
    union = first_publications(raw)
    gone = missing(set(union), expected)
    source: Pairs = {}  # (instrument, seq) -> when the feed sent it
    for r in quotes:
        q = orjson.loads(r.value or b"{}")
        source[(q["instrument"], int(q["seq"]))] = int(q["source_time_ns"])
    lo, hi = kill_ns - 1e9, stop_ns + 5e9
    union_gaps = gaps_between(union, lo, hi)
    worst_inst = worst_per_instrument(union_gaps)
    feed_gaps = {
        k: (source[(k[0], k[1] + 1)] - source[k]) / 1e9
        for k in union_gaps
        if k in source and (k[0], k[1] + 1) in source
    }
    excess = max(union_gaps[k] - feed_gaps[k] for k in feed_gaps)
    latency = max(
        (union[(i, s + 1)] - source[(i, s + 1)]) / 1e9
        for (i, s) in union_gaps
        if (i, s + 1) in source
    )
    base = worst_per_instrument(gaps_between(union, settled_ns, kill_ns - 1e9))
    return {
        "worst_silence_s": round(max(worst_inst.values()), 4),
        "worst_instrument": max(worst_inst, key=lambda i: worst_inst[i]),
        "feed_worst_gap_s": round(max(feed_gaps.values()), 4),
        "worst_excess_over_feed_s": round(excess, 4),
        "worst_latency_s": round(latency, 4),
        "baseline_worst_silence_s": round(max(base.values()), 4) if base else None,
        "seq_pairs_judged": len(union_gaps),
        "feed_quotes": sum(expected.values()),
        "missing_from_union": len(gone),
        "missing_examples": gone[:5],
    }
