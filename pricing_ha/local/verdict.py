"""The outcome of a run judged from the data (:mod:`.judging` judges it): what the feed
produced against what ``prices`` carries.

A run ends in one of three states (:class:`State`), each with its own exit status:

========== ==== ==========================================================================
state      exit meaning
========== ==== ==========================================================================
OK         0    every price exactly once and in order, and no instrument was silent longer
                than the availability bound
DEGRADED   5    every price exactly once and in order, but at least one silence broke the
                bound; each breach is listed with its cause
FAILED     1    a price lost, duplicated or out of order (or the independent subscriber
                found one)
========== ==== ==========================================================================

(3 and 4 are taken: every command exits 3 when the broker is unreachable and 4 on a bad topic
layout, see :mod:`pricing_ha.errors`, so DEGRADED gets a status of its own.)

**The availability bound** (:class:`SilenceBound`) is derived from the feed, not guessed: a
healthy instrument gets a price every tick (``1 / rate``); the relay may hold a price for its
reorder window waiting for a missing seq. So ``ticks`` ticks (2: one late tick is normal
jitter) plus the reorder window is the longest wait a subscriber should see with no fault
hidden from it. A **silence** is the time between two consecutive prices of one instrument,
measured on the record timestamps of ``prices`` (set by the relay when it emitted them) and,
for comparison, on ``prices.raw`` (the first copy of each seq, stamped by its publisher: what a
``--direct`` subscriber could have had).

**Causes.** Each breach is matched against the run's fault timeline (:class:`Fault`): the
latest fault that was active when the silence began, or had happened within ``horizon_s``
before it (a relay fail-over takes S + a rebalance + T to heal), or happened before the next
price was due. A fault that struck while the silence lasted is named beside that cause. Callers
may add what the traces say (:attr:`Silence.trace_note`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "Fault",
    "InstrumentVerdict",
    "Silence",
    "SilenceBound",
    "State",
    "Verdict",
]


class State(enum.Enum):
    """The outcome of a run (see the module docstring for the exit statuses)."""

    OK = "OK"
    DEGRADED = "DEGRADED"
    FAILED = "FAILED"

    @property
    def exit_code(self) -> int:
        """The demo's exit status for this state."""
        return {State.OK: 0, State.DEGRADED: 5, State.FAILED: 1}[self]


@dataclass(frozen=True, kw_only=True)
class SilenceBound:
    """The longest silence per instrument that still counts as available.

    Attributes:
        tick_s: the feed's interval between two quotes of one instrument (``1 / rate``).
        reorder_window_s: the relay's reorder window (``[relay] reorder_window_ms``).
        ticks: how many ticks a price may be late (2 by default).
        override_s: a bound given explicitly (``--silence-bound``), replacing the derivation.
    """

    tick_s: float
    reorder_window_s: float
    ticks: float = 2.0
    override_s: float | None = None

    def __post_init__(self) -> None:
        """Reject bounds that cannot mean anything."""
        if self.tick_s <= 0 or self.reorder_window_s < 0 or self.ticks <= 0:
            raise ValueError(f"invalid silence bound parameters: {self}")
        if self.override_s is not None and self.override_s <= 0:
            raise ValueError(f"the silence bound must be positive, not {self.override_s}")

    @property
    def bound_s(self) -> float:
        """The bound in seconds."""
        if self.override_s is not None:
            return self.override_s
        return self.ticks * self.tick_s + self.reorder_window_s

    def describe(self) -> str:
        """How the bound was obtained, for the report."""
        if self.override_s is not None:
            return f"{self.bound_s:.2f} s (given with --silence-bound)"
        return (
            f"{self.bound_s:.2f} s = {self.ticks:g} ticks of {self.tick_s * 1000:.0f} ms "
            f"+ the relay's reorder window {self.reorder_window_s * 1000:.0f} ms"
        )


@dataclass(frozen=True)
class Fault:
    """One injected fault, on the run's clock (seconds since the run's ``t=0``).

    Attributes:
        at_s: when it was injected.
        text: what it was (``SIGKILL relay-r1``).
        until_s: when it ended, for faults that last (a pause until SIGCONT, an AZ until its
            members are back); ``None`` for an instant (a kill).
    """

    at_s: float
    text: str
    until_s: float | None = None

    def active_at(self, t: float) -> bool:
        """Whether the fault lasts over instant ``t``."""
        return self.until_s is not None and self.at_s <= t <= self.until_s

    def describe(self) -> str:
        """``SIGSTOP p1-b (t=37.8-43.8 s)``."""
        span = f"t={self.at_s:.1f}" + (f"-{self.until_s:.1f}" if self.until_s is not None else "")
        return f"{self.text} ({span} s)"


@dataclass(frozen=True)
class Silence:
    """A wait between two consecutive prices of one instrument, on the run's clock.

    Attributes:
        instrument: the instrument.
        topic: ``prices`` or ``prices.raw``.
        partition: its partition.
        start_s: the price before the silence.
        end_s: the price after it.
        cause: the fault it is attributed to (empty until :func:`attribute`).
        trace_note: what the traces say about it (filled in by the caller, if it can).
    """

    instrument: str
    topic: str
    partition: int
    start_s: float
    end_s: float
    cause: str = ""
    trace_note: str = ""
    #: The fault the cause names (breaches are grouped by it), empty if none.
    fault: str = ""

    @property
    def duration_s(self) -> float:
        """How long it lasted."""
        return self.end_s - self.start_s


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
    #: Longest silence of the first copies on ``prices.raw`` (``None``: not measured).
    raw_longest_silence_s: float | None = None

    @property
    def ok(self) -> bool:
        """Every seq exactly once, in order."""
        return self.duplicates == 0 and self.missing == 0 and self.out_of_order == 0


@dataclass(frozen=True)
class Verdict:
    """The outcome of a run.

    Attributes:
        instruments: one row per instrument.
        bound: the availability bound the silences were held against (``None``: not judged).
        breaches: silences on ``prices`` over the bound, longest first.
        raw_breaches: the same on ``prices.raw`` (first copies), longest first.
        subscriber_ok: whether the independent subscriber found nothing wrong (``None``: no
            subscriber).
    """

    instruments: list[InstrumentVerdict]
    bound: SilenceBound | None = None
    breaches: list[Silence] = field(default_factory=list)
    raw_breaches: list[Silence] = field(default_factory=list)
    subscriber_ok: bool | None = None

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated or reordered, for every instrument the feed produced."""
        return bool(self.instruments) and all(v.ok for v in self.instruments)

    @property
    def state(self) -> State:
        """FAILED on any loss, duplicate or disorder; else DEGRADED on a breach; else OK."""
        if not self.ok or self.subscriber_ok is False:
            return State.FAILED
        return State.DEGRADED if self.breaches else State.OK

    @property
    def longest_silence_s(self) -> float:
        """The longest wait between consecutive prices of any instrument."""
        return max((v.longest_silence_s for v in self.instruments), default=0.0)

    def render(self) -> str:
        """A table, one instrument a row, and the overall verdict."""
        raw = any(v.raw_longest_silence_s is not None for v in self.instruments)
        lines = [
            f"{'instrument':<12}{'expected':>9}{'delivered':>10}{'dup':>5}{'missing':>8}"
            f"{'disorder':>9}{'silence':>9}" + (f"{'raw':>9}" if raw else "")
        ]
        bound = self.bound.bound_s if self.bound is not None else None
        for v in self.instruments:
            flag = " >" if bound is not None and v.longest_silence_s > bound else "  "
            raw_cell = (
                f"{v.raw_longest_silence_s:>8.2f}s" if v.raw_longest_silence_s is not None else ""
            )
            lines.append(
                f"{v.instrument:<12}{v.expected:>9}{v.delivered:>10}{v.duplicates:>5}"
                f"{v.missing:>8}{v.out_of_order:>9}{v.longest_silence_s:>8.2f}s{raw_cell}{flag}"
            )
        total_expected = sum(v.expected for v in self.instruments)
        total = sum(v.delivered for v in self.instruments)
        lines.append(
            f"{'total':<12}{total_expected:>9}{total:>10}"
            f"{sum(v.duplicates for v in self.instruments):>5}"
            f"{sum(v.missing for v in self.instruments):>8}"
            f"{sum(v.out_of_order for v in self.instruments):>9}{self.longest_silence_s:>8.2f}s"
        )
        if raw:
            lines.append(
                "(silence: on prices; raw: on prices.raw, first copy of each seq, what a "
                "--direct subscriber could have had; '>' marks a breach of the bound)"
            )
        return "\n".join(lines)

    def render_breaches(self, limit: int = 12) -> str:
        """The bound, and the breaches grouped by cause (each group: instruments, worst)."""
        if self.bound is None:
            return "availability: not judged (no bound)"
        lines = [f"availability bound per instrument: {self.bound.describe()}"]
        for label, found in (("prices", self.breaches), ("prices.raw", self.raw_breaches)):
            if not found:
                lines.append(f"  {label}: no silence over the bound")
                continue
            instruments = {s.instrument for s in found}
            lines.append(
                f"  {label}: {len(found)} silence(s) over the bound, "
                f"{len(instruments)} instrument(s)"
            )
            groups: dict[str, list[Silence]] = {}
            for s in found:
                groups.setdefault(s.fault or s.cause or "cause unknown", []).append(s)
            for members in list(groups.values())[:limit]:
                worst = max(members, key=lambda s: s.duration_s)
                cause = worst.cause or "cause unknown"
                names = sorted({s.instrument for s in members})
                shown = ", ".join(names[:8]) + (f" (+{len(names) - 8})" if len(names) > 8 else "")
                lines.append(
                    f"    {len(names)} instrument(s) silent up to {worst.duration_s:.2f} s "
                    f"(worst {worst.instrument}, partition {worst.partition}, "
                    f"t={worst.start_s:.1f}-{worst.end_s:.1f} s): {shown}"
                )
                lines.append(f"      cause: {cause}")
                notes = sorted({s.trace_note for s in members if s.trace_note})
                lines.extend(f"      traces: {note}" for note in notes[:4])
        return "\n".join(lines)

    def headline(self) -> str:
        """The ``VERDICT:`` line."""
        state = self.state
        tail = f"(longest silence {self.longest_silence_s:.2f} s"
        if self.bound is not None:
            tail += f", bound {self.bound.bound_s:.2f} s"
        tail += f"; exit {state.exit_code})"
        if state is State.FAILED:
            what = "a price lost, duplicated or out of order - see the rows above"
            if self.ok:
                what = "the independent subscriber found a defect - see its line above"
            return f"VERDICT: FAILED - {what} {tail}"
        if state is State.DEGRADED:
            instruments = len({s.instrument for s in self.breaches})
            worst = max(self.breaches, key=lambda s: s.duration_s)
            return (
                f"VERDICT: DEGRADED - every price delivered exactly once, in order, but "
                f"{instruments} of {len(self.instruments)} instrument(s) were silent longer "
                f"than the bound (worst {worst.duration_s:.2f} s, {worst.cause or 'cause unknown'}"
                f") {tail}"
            )
        return (
            f"VERDICT: OK - every price delivered exactly once, in order, within the bound {tail}"
        )
