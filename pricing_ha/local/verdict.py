"""Judging a run from the data: what the feed produced against what ``prices`` carries."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from pricing_ha.local.cluster import Record


@dataclass(frozen=True)
class InstrumentVerdict:
    """One instrument's outcome."""

    instrument: str
    expected: int
    delivered: int
    duplicates: int
    missing: int
    out_of_order: int
    longest_silence_s: float

    @property
    def ok(self) -> bool:
        """Every seq exactly once, in order."""
        return self.duplicates == 0 and self.missing == 0 and self.out_of_order == 0


@dataclass(frozen=True)
class Verdict:
    """The outcome of a run."""

    instruments: list[InstrumentVerdict]

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated or reordered, for every instrument the feed produced."""
        return bool(self.instruments) and all(v.ok for v in self.instruments)

    @property
    def longest_silence_s(self) -> float:
        """The longest wait between consecutive prices of any instrument."""
        return max((v.longest_silence_s for v in self.instruments), default=0.0)

    def render(self) -> str:
        """A table, one instrument a row, and the overall verdict."""
        lines = [
            f"{'instrument':<12}{'expected':>9}{'delivered':>10}{'dup':>5}{'missing':>8}"
            f"{'disorder':>9}{'silence':>9}"
        ]
        lines.extend(
            f"{v.instrument:<12}{v.expected:>9}{v.delivered:>10}{v.duplicates:>5}"
            f"{v.missing:>8}{v.out_of_order:>9}{v.longest_silence_s:>8.2f}s"
            for v in self.instruments
        )
        total_expected = sum(v.expected for v in self.instruments)
        total = sum(v.delivered for v in self.instruments)
        lines.append(
            f"{'total':<12}{total_expected:>9}{total:>10}"
            f"{sum(v.duplicates for v in self.instruments):>5}"
            f"{sum(v.missing for v in self.instruments):>8}"
            f"{sum(v.out_of_order for v in self.instruments):>9}{self.longest_silence_s:>8.2f}s"
        )
        return "\n".join(lines)


def judge(expected: dict[str, int], prices: list[Record]) -> Verdict:
    """Compare the feed's last seq per instrument (seqs 1..last) with the records on ``prices``.

    Records are taken in partition order (each instrument lives on one partition); silence is
    measured between consecutive records' timestamps (set by the relay when it emitted them).
    """
    by_instrument: dict[str, list[Record]] = {}
    for r in sorted(prices, key=lambda r: (r.partition, r.offset)):
        if r.key is not None and "seq" in r.headers:
            by_instrument.setdefault(r.key.decode(), []).append(r)
    out = []
    for instrument in sorted(expected.keys() | by_instrument.keys()):
        records = by_instrument.get(instrument, [])
        seqs = [int(r.headers["seq"]) for r in records]
        last = expected.get(instrument, 0)
        unique = set(seqs)
        times = [r.timestamp_ms for r in records]
        out.append(
            InstrumentVerdict(
                instrument=instrument,
                expected=last,
                delivered=len(seqs),
                duplicates=len(seqs) - len(unique),
                missing=len(set(range(1, last + 1)) - unique),
                out_of_order=sum(1 for a, b in itertools.pairwise(seqs) if b < a),
                longest_silence_s=max((b - a for a, b in itertools.pairwise(times)), default=0)
                / 1000,
            )
        )
    return Verdict(out)
