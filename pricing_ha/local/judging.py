"""Judging a run (:mod:`.verdict` defines its outcome): the silences on a topic, their causes
from the fault timeline, and the verdict from what the feed produced against what ``prices``
carries."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import replace

from pricing_ha.local.cluster import Record
from pricing_ha.local.seqs import value_epoch
from pricing_ha.local.verdict import Fault, InstrumentVerdict, Silence, SilenceBound, Verdict

__all__ = ["attribute", "judge", "silences"]


def _position(r: Record, seq: int) -> tuple[int, int]:
    """``(epoch, seq)`` of a price record whose value's seq is ``seq`` (its epoch 0 if it has
    none; a restarted feed numbers from seq 1 in a new epoch)."""
    return value_epoch(r.value), seq


def silences(
    records: Iterable[Record], *, topic: str, origin_wall_s: float, over_s: float
) -> list[Silence]:
    """Per instrument, the waits longer than ``over_s`` between consecutive first copies.

    Records are taken in partition order (each instrument lives on one partition); a seq seen
    before (a redundant copy on ``prices.raw``, a duplicate on ``prices``) does not end a
    silence. Times are the records' timestamps, on the run's clock (``origin_wall_s`` is the
    wall time of its ``t=0``).
    """
    last: dict[str, tuple[float, int]] = {}
    seen: dict[str, set[tuple[int, int]]] = {}
    out: list[Silence] = []
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        seq = r.seq
        if r.key is None or seq is None:
            continue
        instrument, position = r.key.decode(), _position(r, seq)
        have = seen.setdefault(instrument, set())
        if position in have:
            continue
        have.add(position)
        t = r.timestamp_ms / 1000 - origin_wall_s
        prev = last.get(instrument)
        if prev is not None and t - prev[0] > over_s:
            out.append(Silence(instrument, topic, r.partition, prev[0], t))
        if prev is None or t > prev[0]:
            last[instrument] = (t, r.partition)
    return sorted(out, key=lambda s: (-s.duration_s, s.instrument))


def attribute(
    found: Sequence[Silence], faults: Sequence[Fault], *, horizon_s: float, next_due_s: float
) -> list[Silence]:
    """Name each silence's cause from the fault timeline (see the module docstring).

    Args:
        found: the silences.
        faults: the injected faults, on the same clock.
        horizon_s: how long after a fault its effects may still begin.
        next_due_s: how long after the last price the next one was due (the bound): a fault
            in that window is what stopped it.
    """
    out = []
    for s in found:
        candidates = [
            f
            for f in faults
            if f.at_s <= s.start_s + next_due_s
            and (f.active_at(s.start_s) or f.at_s >= s.start_s - horizon_s)
        ]
        fault = ""
        if not candidates:
            cause = f"no injected fault within {horizon_s:.0f} s before it: unexplained"
        else:
            main = max(candidates, key=lambda f: f.at_s)
            fault = main.describe()
            if main.active_at(s.start_s):
                cause = f"during {main.describe()}"
            elif main.at_s > s.start_s:
                cause = f"{main.describe()}, {main.at_s - s.start_s:.2f} s after the last price"
            else:
                cause = f"{s.start_s - main.at_s:.1f} s after {main.describe()}"
            others = [f.describe() for f in candidates if f is not main and f.active_at(s.start_s)]
            if others:
                cause += f"; also active: {', '.join(others)}"
        # A fault that strikes while a silence lasts may be what prolongs it (a broker lost
        # while a group was already down): named beside the cause, never instead of it.
        later = [f.describe() for f in faults if s.start_s + next_due_s < f.at_s < s.end_s]
        if later:
            cause += f"; struck during it: {', '.join(later)}"
        out.append(replace(s, cause=cause, fault=fault))
    return out


def judge(
    expected: dict[str, int],
    prices: list[Record],
    *,
    raw: list[Record] | None = None,
    bound: SilenceBound | None = None,
    origin_wall_s: float = 0.0,
    faults: Sequence[Fault] = (),
    horizon_s: float = 12.0,
    subscriber_ok: bool | None = None,
) -> Verdict:
    """Compare the feed's last seq per instrument (seqs 1..last of its epoch, the latest on
    ``prices``) with the records on ``prices``, ordered by ``(epoch, seq)``.

    Records are taken in partition order (each instrument lives on one partition); silence is
    measured between consecutive records' timestamps (set by the relay when it emitted them).

    Args:
        expected: instrument -> the last seq the feed produced.
        prices: everything on ``prices`` (control records excluded).
        raw: everything on ``prices.raw``, to measure the first copies' silences too.
        bound: the availability bound; without it silences are reported, not judged.
        origin_wall_s: the wall time of the run's ``t=0`` (for breach times and causes).
        faults: the run's fault timeline.
        horizon_s: see :func:`attribute`.
        subscriber_ok: the independent subscriber's own verdict, if there was one.
    """
    by_instrument: dict[str, list[Record]] = {}
    for r in sorted(prices, key=lambda r: (r.partition, r.offset)):
        if r.key is not None and r.seq is not None:
            by_instrument.setdefault(r.key.decode(), []).append(r)
    raw_longest: dict[str, float] = {}
    # Every wait between first copies on prices.raw, read once: the longest per instrument,
    # and (below) those over the bound.
    raw_silences = (
        []
        if raw is None
        else silences(raw, topic="prices.raw", origin_wall_s=origin_wall_s, over_s=0.0)
    )
    for s in raw_silences:
        raw_longest[s.instrument] = max(raw_longest.get(s.instrument, 0.0), s.duration_s)
    out = []
    for instrument in sorted(expected.keys() | by_instrument.keys()):
        records = by_instrument.get(instrument, [])
        seqs = [_position(r, seq) for r in records if (seq := r.seq) is not None]
        last = expected.get(instrument, 0)
        unique = set(seqs)
        latest = max((epoch for epoch, _ in unique), default=0)
        times = [r.timestamp_ms for r in records]
        out.append(
            InstrumentVerdict(
                instrument=instrument,
                expected=last,
                delivered=len(seqs),
                duplicates=len(seqs) - len(unique),
                missing=len(set(range(1, last + 1)) - {s for e, s in unique if e == latest}),
                out_of_order=sum(1 for a, b in itertools.pairwise(seqs) if b < a),
                longest_silence_s=max((b - a for a, b in itertools.pairwise(times)), default=0)
                / 1000,
                raw_longest_silence_s=None if raw is None else raw_longest.get(instrument, 0.0),
            )
        )
    breaches: list[Silence] = []
    raw_breaches: list[Silence] = []
    if bound is not None:
        limit = bound.bound_s
        found = silences(prices, topic="prices", origin_wall_s=origin_wall_s, over_s=limit)
        breaches = attribute(found, faults, horizon_s=horizon_s, next_due_s=limit)
        if raw is not None:
            found_raw = [s for s in raw_silences if s.duration_s > limit]
            raw_breaches = attribute(found_raw, faults, horizon_s=horizon_s, next_due_s=limit)
    return Verdict(out, bound, breaches, raw_breaches, subscriber_ok)
