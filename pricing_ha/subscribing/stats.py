"""What a subscriber saw, per instrument: deliveries, gaps, duplicates, silences, latency.

The counters are computed from the delivered stream itself, independently of the arbitration
that produced it: a delivery whose ``(epoch, seq)`` is not above the previous one is counted in
``out_of_order`` (it must stay 0), and a jump in seq counts the missing seqs in ``gaps`` (a new
epoch, a restarted feed, counts from its seq 1). So a
verdict built on these figures checks the arbitration rather than trusting it.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["InstrumentStats", "SubscriberStats", "percentiles"]

_LATENCY_SAMPLES = 100_000


@dataclass(slots=True)
class InstrumentStats:
    """One instrument's delivered stream.

    Attributes:
        delivered: prices delivered.
        first_seq: seq of the first delivery, or ``None``.
        last_seq: seq of the latest delivery, or ``None``.
        last_epoch: epoch of the latest delivery (0: none, or a feed without epochs).
        gaps: seqs missing between consecutive deliveries.
        gap_events: jumps in seq (one may cover several seqs).
        duplicates: copies dropped as defects (a duplicate on the relay's output topic).
        copies_dropped: the redundant A/B copies dropped in direct mode (expected, no defect).
        out_of_order: deliveries whose seq was not above the previous one (must stay 0).
        switches: publisher switches seen (direct mode).
        max_silence_s: longest time between two consecutive deliveries, or that the instrument
            was seen silent while others were delivered (see
            :meth:`SubscriberStats.check_staleness`).
        last_received: monotonic time of the latest delivery, or ``None``.
    """

    delivered: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    last_epoch: int = 0
    gaps: int = 0
    gap_events: int = 0
    duplicates: int = 0
    copies_dropped: int = 0
    out_of_order: int = 0
    switches: int = 0
    max_silence_s: float = 0.0
    last_received: float | None = None

    def on_delivered(self, seq: int, now: float, *, switched: bool = False, epoch: int = 0) -> None:
        """Records one delivery (of ``(epoch, seq)``) at monotonic time ``now``."""
        last = self.last_seq
        if last is not None and epoch > self.last_epoch:
            last = 0  # a new epoch (the feed restarted) counts from its seq 1
        if last is None:
            self.first_seq = seq
        elif epoch < self.last_epoch or seq <= last:
            self.out_of_order += 1
        elif seq > last + 1:
            self.gaps += seq - last - 1
            self.gap_events += 1
        if self.last_received is not None:
            self.max_silence_s = max(self.max_silence_s, now - self.last_received)
        self.last_received = now
        if epoch >= self.last_epoch:
            self.last_seq = seq if last is None else max(last, seq)
            self.last_epoch = epoch
        self.delivered += 1
        self.switches += switched

    def reset_mark(self) -> None:
        """An operator reset the instrument's mark: the next delivery starts it again."""
        self.last_seq = None
        self.last_epoch = 0


def percentiles(samples: list[float]) -> dict[str, float]:
    """n, p50, p99 and max of ``samples`` in milliseconds (nearest rank); empty gives n = 0."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {
        "n": len(ordered),
        "p50_ms": round(rank(0.50) * 1000, 3),
        "p99_ms": round(rank(0.99) * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


@dataclass(slots=True)
class SubscriberStats:
    """A subscriber's counters.

    Attributes:
        direct: whether the subscriber arbitrates ``prices.raw`` itself.
        topic: the topic read.
        max_silence_bound_s: the staleness bound: the verdict fails if any instrument went
            silent for longer (``None``: no bound).
        instruments: per-instrument figures.
        invalid: records that could not be decoded (or whose headers contradict the value).
        errors: consumer errors reported by librdkafka.
        bad_headers: prices delivered whose ``publish_ns`` header was malformed (left out).
        publish_latency_s: recent publish-to-receive latencies (the ``publish_ns`` header).
        source_latency_s: recent source-to-receive latencies (the price's source time).
    """

    direct: bool
    topic: str
    max_silence_bound_s: float | None = None
    instruments: dict[str, InstrumentStats] = field(default_factory=dict)
    invalid: int = 0
    errors: int = 0
    bad_headers: int = 0
    publish_latency_s: deque[float] = field(default_factory=lambda: deque(maxlen=_LATENCY_SAMPLES))
    source_latency_s: deque[float] = field(default_factory=lambda: deque(maxlen=_LATENCY_SAMPLES))

    def instrument(self, name: str) -> InstrumentStats:
        """The figures of ``name``, created on first use."""
        stats = self.instruments.get(name)
        if stats is None:
            stats = self.instruments[name] = InstrumentStats()
        return stats

    def on_dropped(self, name: str) -> None:
        """Counts a dropped copy: a defect on the relay's output, redundancy in direct mode."""
        stats = self.instrument(name)
        if self.direct:
            stats.copies_dropped += 1
        else:
            stats.duplicates += 1

    def total(self, attribute: str) -> int:
        """The sum of one integer attribute of :class:`InstrumentStats` over instruments."""
        return sum(int(getattr(s, attribute)) for s in self.instruments.values())

    @property
    def max_silence_s(self) -> float:
        """The longest silence of any instrument."""
        return max((s.max_silence_s for s in self.instruments.values()), default=0.0)

    def check_staleness(self, now: float) -> None:
        """Counts an instrument's ongoing silence while the topic as a whole is live.

        A silence is only measured between two deliveries by :meth:`InstrumentStats.
        on_delivered`, so an instrument that stops for good would never show one. Called
        periodically, this also counts the time an instrument has been silent *while another
        instrument was delivered meanwhile* (so the end of the feed is not mistaken for an
        outage).
        """
        newest = max(
            (s.last_received for s in self.instruments.values() if s.last_received is not None),
            default=None,
        )
        if newest is None:
            return
        for s in self.instruments.values():
            if s.last_received is not None and s.last_received < newest:
                s.max_silence_s = max(s.max_silence_s, min(now, newest) - s.last_received)

    @property
    def silent_too_long(self) -> list[str]:
        """Instruments whose longest silence exceeded the staleness bound."""
        bound = self.max_silence_bound_s
        if bound is None:
            return []
        return sorted(n for n, s in self.instruments.items() if s.max_silence_s > bound)

    @property
    def ok(self) -> bool:
        """No gap, no duplicate, nothing out of order or undecodable, no silence over the bound."""
        return (
            not any(self.total(name) for name in ("gaps", "duplicates", "out_of_order"))
            and not self.invalid
            and not self.silent_too_long
        )

    def summary(self) -> dict[str, Any]:
        """The verdict as JSON-ready data (``--summary-out``)."""
        per: dict[str, dict[str, Any]] = {}
        for name, s in sorted(self.instruments.items()):
            row = asdict(s)
            del row["last_received"]
            # Seconds to the millisecond, like every duration of the summary.
            row["max_silence_s"] = round(s.max_silence_s, 3)
            per[name] = row
        totals = (
            "delivered",
            "gaps",
            "gap_events",
            "duplicates",
            "copies_dropped",
            "out_of_order",
            "switches",
        )
        return {
            "mode": "direct" if self.direct else "relay",
            "topic": self.topic,
            **{name: self.total(name) for name in totals},
            "invalid": self.invalid,
            "errors": self.errors,
            "max_silence_s": round(self.max_silence_s, 3),
            "max_silence_bound_s": self.max_silence_bound_s,
            "silent_too_long": self.silent_too_long,
            "latency": {
                "publish_to_receive": percentiles(list(self.publish_latency_s)),
                "source_to_receive": percentiles(list(self.source_latency_s)),
            },
            "ok": self.ok,
            "instruments": per,
        }

    def render(self, now: float, max_rows: int = 40) -> str:
        """A table of the instruments (at most ``max_rows``) with totals, for a terminal."""
        head = (
            f"{'instrument':<12} {'last seq':>9} {'delivered':>9} {'gaps':>5} {'dups':>5} "
            f"{'stale s':>8} {'max silence ms':>14}"
        )
        lines = [head, "-" * len(head)]
        for name, s in sorted(self.instruments.items())[:max_rows]:
            stale = now - s.last_received if s.last_received is not None else float("nan")
            lines.append(
                f"{name:<12} {s.last_seq or 0:>9} {s.delivered:>9} {s.gaps:>5} {s.duplicates:>5} "
                f"{stale:>8.2f} {s.max_silence_s * 1000:>14.0f}"
            )
        if len(self.instruments) > max_rows:
            lines.append(f"... and {len(self.instruments) - max_rows} more")
        lat = percentiles(list(self.publish_latency_s))
        mode = "direct (A/B arbitration of the raw topic)" if self.direct else "relay output"
        lines.append(
            f"{mode}: {self.total('delivered')} delivered, {self.total('gaps')} gaps, "
            f"{self.total('duplicates')} duplicates, {self.total('copies_dropped')} copies "
            f"dropped, {self.invalid} invalid; latency p50 {lat.get('p50_ms', 0):.1f} ms, "
            f"p99 {lat.get('p99_ms', 0):.1f} ms"
        )
        return "\n".join(lines)
