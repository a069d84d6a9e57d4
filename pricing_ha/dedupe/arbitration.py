"""Where dedupe is decided: A/B line arbitration of per-instrument sequence numbers.

Groups P1 and P2 both publish every ``(instrument, seq)``, so each normally arrives twice,
possibly reordered, and occasionally once (one group failing over) or never (a true gap).
:class:`Arbiter` turns those copies into one stream per instrument, in seq order, each seq at
most once. It is the one implementation shared by the relay and the subscriber's direct mode.

It is pure: no I/O, no threads, no clock of its own. The caller passes ``now`` (monotonic
seconds) into every call and calls :meth:`Arbiter.expire` by :meth:`Arbiter.next_deadline`.

Per instrument, with ``hw`` the highest seq emitted (the high-water mark):

============================  =============================================================
an offered ``seq``            outcome
============================  =============================================================
no ``hw`` yet                 emitted at once (the stream starts there)
``seq <= hw`` or already held dropped, counted in ``duplicates``
``seq == hw + 1``             emitted, followed by any held contiguous successors
``seq > hw + 1``              held until ``hw + 1`` arrives, or until it has waited the
                              reorder window; then the missing seqs are declared a gap
                              (``gaps``, ``gap_events``) and held items are emitted in order
============================  =============================================================

Guarantee: for each instrument the emitted seqs are strictly increasing, whatever is offered,
and no held item waits longer than the window once :meth:`Arbiter.expire` is called on time.
After :meth:`Arbiter.set_high_water` (a relay rebuilding its marks from its output topic)
nothing at or below the mark is ever emitted again.

Publisher switches. Whichever copy arrives first wins, so with both groups healthy the winning
source flips between them all the time; that is no fail-over. Each instrument therefore has a
*primary* source, the one it follows, and the highest seq the primary has offered. An emission
from another source is a switch only if the primary has already missed a seq before it (the
primary has offered nothing at or above ``seq - 1``): a source that dies, stalls or falls more
than one seq behind loses the instrument, one that merely loses a race does not.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = ["Arbiter", "Emission"]

T = TypeVar("T")


class Emission(NamedTuple, Generic[T]):
    """One item released by the arbiter, in seq order for its instrument.

    A named tuple rather than a frozen dataclass: just as immutable, and about three times
    cheaper to create, which matters at one per price on the relay's hot path.

    Attributes:
        instrument: the instrument (Kafka key).
        seq: the source sequence number.
        item: the caller's payload, as offered (the winning copy).
        source: who offered the winning copy, e.g. ``"p1/a"``.
        gap_before: seqs declared missing right before this one (0 normally).
        switched_from: the previous primary source if this emission is a publisher switch,
            else ``None`` (see the module docstring).
        silence_s: time since this instrument's previous emission (0.0 for its first).
        dropped_since_switch: duplicates dropped for this instrument since its previous
            switch (or since it was first seen).
    """

    instrument: str
    seq: int
    item: T
    source: str
    gap_before: int
    switched_from: str | None
    silence_s: float
    dropped_since_switch: int


# The ``held`` of every line that holds nothing: one shared, never-written empty dict, so an
# instrument costs no dict of its own until it holds something (64 bytes each otherwise, about
# a quarter of a line). A line gets a private dict on its first held item and gives it back
# when it empties. Nothing writes through this object: see ``Arbiter.offer``.
_NOTHING_HELD: dict[int, tuple[Any, str, float]] = {}


class _Line(Generic[T]):
    """The arbitration state of one instrument."""

    __slots__ = (
        "deadline",
        "dropped",
        "held",
        "hw",
        "instrument",
        "last_emit",
        "primary",
        "primary_seq",
    )

    def __init__(self, instrument: str) -> None:
        self.instrument = instrument
        self.hw = 0  # highest seq emitted or set (a line exists only once there is one)
        # seq -> (item, source, arrival); the shared empty dict while nothing is held
        self.held: dict[int, tuple[T, str, float]] = _NOTHING_HELD
        self.deadline = 0.0  # when the oldest held item's window ends (if any are held)
        self.primary = ""  # "" until the first emission
        self.primary_seq = 0  # highest seq offered by the primary
        self.last_emit = 0.0
        self.dropped = 0


class Arbiter(Generic[T]):
    """A/B arbitration of many instruments' seq streams (see the module docstring).

    Attributes:
        reorder_window_s: how long an out-of-order item waits for the missing seqs.
        emitted: items emitted.
        duplicates: copies dropped (at or below the high-water mark, or already held).
        gaps: missing seqs declared.
        gap_events: times a gap was declared (one event may cover several seqs).
        reordered: items that were held and emitted later.
        switches: publisher switches (emissions with ``switched_from`` set).
    """

    def __init__(self, reorder_window_s: float) -> None:
        """Creates an arbiter with no instruments.

        Args:
            reorder_window_s: the reorder window, >= 0 (0 declares a gap at once).

        Raises:
            ValueError: if the window is negative.
        """
        if reorder_window_s < 0:
            raise ValueError(f"reorder_window_s must be >= 0, got {reorder_window_s}")
        self.reorder_window_s = reorder_window_s
        self._lines: dict[str, _Line[T]] = {}
        self._deadlines: list[tuple[float, str]] = []  # heap; stale entries skipped lazily
        self.emitted = 0
        self.duplicates = 0
        self.gaps = 0
        self.gap_events = 0
        self.reordered = 0
        self.switches = 0

    # -- the hot path -------------------------------------------------------------------------

    def offer(
        self, instrument: str, seq: int, item: T, source: str, now: float
    ) -> list[Emission[T]]:
        """Offers one copy; returns what it releases (usually one emission or none).

        Args:
            instrument: the instrument.
            seq: its sequence number.
            item: the payload, returned in the emission if this copy wins.
            source: who published this copy, e.g. ``"p2/b"``.
            now: monotonic seconds.
        """
        line = self._lines.get(instrument)
        if line is None:
            line = self._lines[instrument] = _Line(instrument)
            return [self._emit(line, seq, item, source, now)]
        if source == line.primary and seq > line.primary_seq:
            line.primary_seq = seq
        hw = line.hw
        if seq <= hw or seq in line.held:
            self.duplicates += 1
            line.dropped += 1
            return []
        if seq == hw + 1:
            out = [self._emit(line, seq, item, source, now)]
            if line.held:
                self._release_contiguous(line, now, out)
            return out
        if line.held is _NOTHING_HELD:
            line.held = {}
        line.held[seq] = (item, source, now)
        if self.reorder_window_s <= 0:
            return self._expire_line(line, now)
        if len(line.held) == 1:
            line.deadline = now + self.reorder_window_s
            heapq.heappush(self._deadlines, (line.deadline, instrument))
        return []

    def _emit(
        self, line: _Line[T], seq: int, item: T, source: str, now: float, *, gap: int = 0
    ) -> Emission[T]:
        switched_from = None
        dropped = line.dropped
        if not line.primary:  # the instrument's first emission
            silence = 0.0
            line.primary, line.primary_seq = source, seq
        else:
            silence = now - line.last_emit
            if source != line.primary and line.primary_seq < seq - 1:
                switched_from = line.primary
                line.primary, line.primary_seq = source, seq
                line.dropped = 0
                self.switches += 1
        line.hw = seq
        line.last_emit = now
        self.emitted += 1
        if gap:
            self.gaps += gap
            self.gap_events += 1
        return Emission(line.instrument, seq, item, source, gap, switched_from, silence, dropped)

    # -- holding and expiry -------------------------------------------------------------------

    def _release_contiguous(self, line: _Line[T], now: float, out: list[Emission[T]]) -> None:
        held = line.held
        nxt = line.hw + 1
        while nxt in held:
            item, source, _ = held.pop(nxt)
            self.reordered += 1
            out.append(self._emit(line, nxt, item, source, now))
            nxt += 1
        self._reschedule(line)

    def _reschedule(self, line: _Line[T]) -> None:
        if not line.held:
            line.held = _NOTHING_HELD  # its own (emptied) dict is freed
            return
        oldest = min(arrival for _, _, arrival in line.held.values())
        deadline = oldest + self.reorder_window_s
        if deadline != line.deadline:
            line.deadline = deadline
            heapq.heappush(self._deadlines, (deadline, line.instrument))

    def _expire_line(self, line: _Line[T], now: float) -> list[Emission[T]]:
        """Releases every held item whose window has ended, declaring the gaps before them."""
        window = self.reorder_window_s
        expired = [s for s, (_, _, arrival) in line.held.items() if arrival + window <= now]
        out: list[Emission[T]] = []
        if not expired:
            self._reschedule(line)
            return out
        cutoff = max(expired)
        for seq in sorted(s for s in line.held if s <= cutoff):
            item, source, _ = line.held.pop(seq)
            self.reordered += 1
            out.append(self._emit(line, seq, item, source, now, gap=seq - line.hw - 1))
        self._release_contiguous(line, now, out)
        return out

    def expire(self, now: float) -> list[Emission[T]]:
        """Releases held items whose reorder window has ended, declaring the gaps before them.

        Args:
            now: monotonic seconds.

        Returns:
            The released emissions, each instrument's in seq order.
        """
        out: list[Emission[T]] = []
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            deadline, instrument = heapq.heappop(heap)
            line = self._lines.get(instrument)
            if line is None or not line.held or line.deadline != deadline:
                continue  # stale: released, rescheduled or forgotten since
            out.extend(self._expire_line(line, now))
        return out

    def next_deadline(self) -> float | None:
        """The earliest time at which :meth:`expire` would release something, or ``None``."""
        heap = self._deadlines
        while heap:
            deadline, instrument = heap[0]
            line = self._lines.get(instrument)
            if line is not None and line.held and line.deadline == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    # -- state --------------------------------------------------------------------------------

    def set_high_water(self, instrument: str, seq: int) -> None:
        """Declares ``seq`` and everything below it emitted (e.g. by a previous relay owner).

        Nothing at or below the mark is emitted afterwards. A higher mark already held is
        kept; held items at or below the mark are dropped as duplicates. Meant to be called
        before offering (when rebuilding); held items above the mark keep their deadline.
        """
        line = self._lines.get(instrument)
        if line is None:
            if seq < 1:
                return
            line = self._lines[instrument] = _Line(instrument)
        if seq <= line.hw:
            return
        line.hw = seq
        for s in [s for s in line.held if s <= seq]:
            del line.held[s]
            self.duplicates += 1
            line.dropped += 1
        self._reschedule(line)

    def high_water(self, instrument: str) -> int | None:
        """The highest seq emitted (or set) for ``instrument``, or ``None`` if none."""
        line = self._lines.get(instrument)
        return line.hw if line is not None and line.hw > 0 else None

    def held_count(self) -> int:
        """How many items are held waiting for missing seqs, over all instruments."""
        return sum(len(line.held) for line in self._lines.values())

    def held(self) -> list[T]:
        """The items held waiting for missing seqs (callers must not commit past them)."""
        return [item for line in self._lines.values() for item, _, _ in line.held.values()]

    def knows(self, instrument: str) -> bool:
        """Whether ``instrument`` has state here (a mark, held items)."""
        return instrument in self._lines

    def instrument_count(self) -> int:
        """How many instruments have state here."""
        return len(self._lines)

    def instruments(self) -> list[str]:
        """The instruments with state, in the order they were first seen."""
        return list(self._lines)

    def forget(self, instruments: Iterable[str]) -> None:
        """Drops all state of ``instruments`` (held items are discarded, not emitted)."""
        for instrument in instruments:
            self._lines.pop(instrument, None)
