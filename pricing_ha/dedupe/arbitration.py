"""Where dedupe is decided: A/B line arbitration of per-instrument sequence numbers.

Groups P1 and P2 both publish every ``(instrument, seq)``, so each normally arrives twice,
possibly reordered, and occasionally once (one group failing over) or never (a true gap).
:class:`Arbiter` turns those copies into one stream per instrument, in seq order, each seq at
most once. It is the one implementation shared by the relay and the subscriber's direct mode.

It is pure: no I/O, no threads, no clock of its own. The caller passes ``now`` (monotonic
seconds) into every call and calls :meth:`Arbiter.expire` by :meth:`Arbiter.next_deadline`;
with bounds, the wall clock (for the epoch's skew) is injected too.

Items are ordered by **position**, ``(epoch, seq)`` packed into one integer
(:mod:`pricing_ha.publishing.epochs`; in epoch 0 the position is the seq). Per instrument, with
``hw`` the highest position emitted (the high-water mark), its *successor* being ``hw + 1`` in
its epoch, or seq 1 of a later epoch (a restarted feed):

============================  =============================================================
an offered position           outcome
============================  =============================================================
no ``hw`` yet                 emitted at once (the stream starts there)
``<= hw`` or already held     dropped, counted in ``duplicates``
the successor of ``hw``       emitted, followed by any held contiguous successors
further ahead                 held until the missing ones arrive, or until it has waited the
                              reorder window; then the missing seqs are declared a gap
                              (``gaps``, ``gap_events``) and held items are emitted in order
============================  =============================================================

**Bounds** (when given :class:`Bounds`). Before that table, a *suspect* position is held
apart until the other group confirms it (a copy of the same position from a source of another
group: the part of ``source`` before its last ``/``), and then placed as above:

* *hard*: its epoch is more than ``max_epoch_skew_ms`` ahead of the wall clock, or its seq
  jumps more than ``max_seq_jump`` ahead of ``hw`` in ``hw``'s epoch, or more than
  ``max_seq_jump`` from 0 in a later epoch. Unconfirmed within the reorder window, it is
  *rejected* (:meth:`Arbiter.take_rejected`, for the caller to dead-letter with the reason).
* *a new epoch*: a later epoch within those bounds (a feed restart). Unconfirmed within the
  window, it is accepted if the instrument emitted nothing meanwhile (the old epoch has gone
  quiet: a real restart seen by one group only), else rejected (the current epoch goes on: a
  forged epoch).
* *a first jump*: a first position beyond ``max_seq_jump`` with no ``hw`` yet (a new
  instrument, a mark reset, a relay with no history of it). Unconfirmed within the window, it
  is accepted if a copy of its next seq came too (the stream goes on from it), else rejected.

Suspects that an emission brings within bounds (the next seqs of a new epoch once its first
is accepted) are re-examined at once. So one forged record cannot move a mark beyond what
the other group confirms, and a real feed restart costs nothing with both groups up, one
reorder window with one.

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
from typing import TypeVar

from pricing_ha.dedupe._confirmations import Confirmations
from pricing_ha.dedupe._lines import (
    NO_SUSPECTS,
    NOTHING_HELD,
    Bounds,
    Emission,
    Line,
    group_of,
    successor,
)
from pricing_ha.publishing.epochs import SEQ_BITS, epoch_of, seq_in_epoch

__all__ = ["Arbiter", "Bounds", "Emission"]

T = TypeVar("T")


class Arbiter(Confirmations[T]):
    """A/B arbitration of many instruments' seq streams (see the module docstring).

    Attributes:
        reorder_window_s: how long an out-of-order item waits for the missing seqs.
        emitted: items emitted.
        duplicates: copies dropped (at or below the high-water mark, or already held).
        gaps: missing seqs declared.
        gap_events: times a gap was declared (one event may cover several seqs).
        reordered: items that were held and emitted later.
        switches: publisher switches (emissions with ``switched_from`` set).
        suspects: copies held apart as out of bounds (see the module docstring).
        confirmed: suspects confirmed by the other group.
        unconfirmed: suspects rejected (see :meth:`take_rejected`).
    """

    def __init__(self, reorder_window_s: float, bounds: Bounds | None = None) -> None:
        """Creates an arbiter with no instruments.

        Args:
            reorder_window_s: the reorder window, >= 0 (0 declares a gap at once); also how
                long a suspect waits for confirmation.
            bounds: the bounds on unconfirmed copies; ``None``: every copy is taken at its word
                (a reader of one source, such as ``prices``, has nobody to confirm it).

        Raises:
            ValueError: if the window is negative.
        """
        if reorder_window_s < 0:
            raise ValueError(f"reorder_window_s must be >= 0, got {reorder_window_s}")
        self.reorder_window_s = reorder_window_s
        self.bounds = bounds
        super().__init__()
        self._lines: dict[str, Line[T]] = {}
        self._deadlines: list[tuple[float, str]] = []  # heap; stale entries skipped lazily
        self.emitted = 0
        self.duplicates = 0
        self.gaps = 0
        self.gap_events = 0
        self.reordered = 0
        self.switches = 0

    # -- the hot path -------------------------------------------------------------------------

    def offer(
        self, instrument: str, seq: int, item: T, source: str, now: float, *, epoch: int = 0
    ) -> list[Emission[T]]:
        """Offers one copy; returns what it releases (usually one emission or none).

        Args:
            instrument: the instrument.
            seq: its sequence number.
            item: the payload, returned in the emission if this copy wins.
            source: who published this copy, e.g. ``"p2/b"`` (group, then member).
            now: monotonic seconds.
            epoch: its epoch (0: none).
        """
        pos = (epoch << SEQ_BITS) | seq
        line = self._lines.get(instrument)
        if line is None:
            line = self._lines[instrument] = Line(instrument)
        if source == line.primary and pos > line.primary_seq:
            line.primary_seq = pos
        hw = line.hw
        if pos <= hw or pos in line.held:
            self.duplicates += 1
            line.dropped += 1
            return []
        out: list[Emission[T]] = []
        if line.suspects:
            suspect = line.suspects.get(pos)
            if suspect is not None:
                self.duplicates += 1
                line.dropped += 1
                if group_of(suspect[1]) == group_of(source):
                    return out  # the same group again confirms nothing
                del line.suspects[pos]
                self.confirmed += 1
                self._place(line, pos, suspect[0], suspect[1], now, out=out)
                self._after(line, now, out)
                return out
        # The next seq of the mark's own epoch is within any bounds: the common case skips them.
        if (
            self.bounds is not None
            and pos != hw + 1
            and self._suspect(line, pos, item, source, now)
        ):
            return self._expire_line(line, now) if self.reorder_window_s <= 0 else out
        self._place(line, pos, item, source, now, out=out)
        self._after(line, now, out)
        return out

    def _place(
        self,
        line: Line[T],
        pos: int,
        item: T,
        source: str,
        now: float,
        *,
        out: list[Emission[T]],
        since: float | None = None,
    ) -> None:
        """Emits ``pos`` if it continues the line (or starts it), else holds it for the window
        (counted from ``since``, when it came, if it has waited already as a suspect)."""
        if line.hw == 0 or successor(line.hw, pos):
            out.append(self._emit(line, pos, item, source, now))
            if line.held:
                self._release_contiguous(line, now, out)
            return
        if line.held is NOTHING_HELD:
            line.held = {}
        line.held[pos] = (item, source, now if since is None else since)
        if self.reorder_window_s > 0 and len(line.held) == 1 and not line.suspects:
            line.deadline = now + self.reorder_window_s
            heapq.heappush(self._deadlines, (line.deadline, line.instrument))

    def _after(self, line: Line[T], now: float, out: list[Emission[T]]) -> None:
        """After an offer: with a zero window, release at once; re-examine suspects that an
        emission brought within bounds."""
        if line.held and self.reorder_window_s <= 0:
            out.extend(self._expire_line(line, now))
        if out and line.suspects:
            self._recheck(line, now, out)

    def _emit(
        self, line: Line[T], pos: int, item: T, source: str, now: float, *, gap: int = 0
    ) -> Emission[T]:
        switched_from = None
        dropped = line.dropped
        if not line.primary:  # the instrument's first emission
            silence = 0.0
            line.primary, line.primary_seq = source, pos
        else:
            silence = now - line.last_emit
            if source != line.primary and line.primary_seq < pos - 1:
                switched_from = line.primary
                line.primary, line.primary_seq = source, pos
                line.dropped = 0
                self.switches += 1
        line.hw = pos
        if line.held and min(line.held) < pos:
            # Overtaken: seq 1 of a later epoch (a restarted feed) went out while seqs of the
            # earlier epoch were held for a missing one; they can no longer go out in order.
            # Declared missing, like a gap (the hypothesis suite found them emitted after it).
            overtaken = [s for s in line.held if s < pos]
            for s in overtaken:
                del line.held[s]
            gap += len(overtaken)
        line.last_emit = now
        line.emits += 1
        self.emitted += 1
        if gap:
            self.gaps += gap
            self.gap_events += 1
        seq, epoch = seq_in_epoch(pos), epoch_of(pos)
        return Emission(
            line.instrument, seq, item, source, gap, switched_from, silence, dropped, epoch
        )

    # -- holding and expiry -------------------------------------------------------------------

    def _release_contiguous(self, line: Line[T], now: float, out: list[Emission[T]]) -> None:
        held = line.held
        while held:
            nxt = min(held)
            if not successor(line.hw, nxt):
                break
            item, source, _ = held.pop(nxt)
            self.reordered += 1
            out.append(self._emit(line, nxt, item, source, now))
        self._reschedule(line)

    def _reschedule(self, line: Line[T]) -> None:
        if not line.held:
            line.held = NOTHING_HELD  # its own (emptied) dict is freed
            if not line.suspects:
                return
        arrivals = [arrival for _, _, arrival in line.held.values()]
        arrivals += [suspect[2] for suspect in line.suspects.values()]
        deadline = min(arrivals) + self.reorder_window_s
        if deadline != line.deadline:
            line.deadline = deadline
            heapq.heappush(self._deadlines, (deadline, line.instrument))

    def _expire_line(self, line: Line[T], now: float) -> list[Emission[T]]:
        """Decides expired suspects, then releases every held item whose window has ended,
        declaring the gaps before them."""
        out: list[Emission[T]] = []
        if line.suspects:
            self._decide_suspects(line, now, out)
        window = self.reorder_window_s
        expired = [s for s, (_, _, arrival) in line.held.items() if arrival + window <= now]
        if expired:
            cutoff = max(expired)
            for pos in sorted(s for s in line.held if s <= cutoff):
                item, source, _ = line.held.pop(pos)
                self.reordered += 1
                hw = line.hw
                same = epoch_of(hw) == epoch_of(pos)
                gap = seq_in_epoch(pos) - (seq_in_epoch(hw) if same else 0) - 1
                out.append(self._emit(line, pos, item, source, now, gap=gap))
            self._release_contiguous(line, now, out)
        if out and line.suspects:
            self._recheck(line, now, out)
        self._reschedule(line)
        return out

    def expire(self, now: float) -> list[Emission[T]]:
        """Releases held items whose reorder window has ended, declaring the gaps before them;
        decides suspects whose window has ended (:meth:`take_rejected`).

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
            if line is None or not (line.held or line.suspects) or line.deadline != deadline:
                continue  # stale: released, rescheduled or forgotten since
            out.extend(self._expire_line(line, now))
        return out

    def next_deadline(self) -> float | None:
        """The earliest time at which :meth:`expire` would release something, or ``None``."""
        heap = self._deadlines
        while heap:
            deadline, instrument = heap[0]
            line = self._lines.get(instrument)
            if line is not None and (line.held or line.suspects) and line.deadline == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    # -- state --------------------------------------------------------------------------------

    def set_high_water(self, instrument: str, seq: int) -> None:
        """Declares position ``seq`` and everything below it emitted (e.g. by a previous relay
        owner; a position of epoch 0 is its seq: :mod:`pricing_ha.publishing.epochs`).

        Nothing at or below the mark is emitted afterwards. A higher mark already held is
        kept; held items at or below the mark are dropped as duplicates. Meant to be called
        before offering (when rebuilding); held items above the mark keep their deadline.
        """
        line = self._lines.get(instrument)
        if line is None:
            if seq < 1:
                return
            line = self._lines[instrument] = Line(instrument)
        if seq <= line.hw:
            return
        line.hw = seq
        for s in [s for s in line.held if s <= seq]:
            del line.held[s]
            self.duplicates += 1
            line.dropped += 1
        for s in [s for s in line.suspects if s <= seq]:
            del line.suspects[s]
        if not line.suspects:
            line.suspects = NO_SUSPECTS
        self._reschedule(line)

    def reset_mark(self, instrument: str) -> int | None:
        """Forgets ``instrument``'s mark, and what it holds (an operator's reset of a mark a
        bad record moved too far): its next copy starts it again, within the bounds. Returns
        the mark it had, or ``None``."""
        line = self._lines.get(instrument)
        if line is None:
            return None
        mark = line.hw or None
        line.hw = 0
        line.primary, line.primary_seq = "", 0
        line.held, line.suspects = NOTHING_HELD, NO_SUSPECTS
        return mark

    def high_water(self, instrument: str) -> int | None:
        """The highest position emitted (or set) for ``instrument`` (its seq in epoch 0), or
        ``None`` if none."""
        line = self._lines.get(instrument)
        return line.hw if line is not None and line.hw > 0 else None

    def held_count(self) -> int:
        """How many items are held waiting for missing seqs or confirmation, over all
        instruments."""
        return sum(len(line.held) + len(line.suspects) for line in self._lines.values())

    def held(self) -> list[T]:
        """The items held waiting for missing seqs or confirmation (callers must not commit
        past them)."""
        return [
            item
            for line in self._lines.values()
            for item in [v[0] for v in line.held.values()] + [v[0] for v in line.suspects.values()]
        ]

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
