"""Confirmation of suspect copies: the part of :class:`.arbitration.Arbiter` that holds
out-of-bounds positions apart until the other group confirms them, and decides them when their
window ends (the rules are in :mod:`.arbitration`'s docstring, under **Bounds**).

A mixin: :class:`Confirmations` keeps the rejected list and works on the arbiter's lines,
deadline heap and placement, which :class:`~.arbitration.Arbiter` defines.
"""

from __future__ import annotations

import heapq
from typing import Any, Generic, TypeVar

from pricing_ha.dedupe._lines import (
    CONTINUED,
    HARD,
    NO_SUSPECTS,
    QUIET,
    Bounds,
    Emission,
    Line,
)
from pricing_ha.publishing.epochs import describe, epoch_of

__all__ = ["Confirmations"]

T = TypeVar("T")


class Confirmations(Generic[T]):
    """Holding, confirming and deciding suspects (mixed into the arbiter).

    Attributes:
        suspects: copies held apart as out of bounds.
        confirmed: suspects confirmed by the other group.
        unconfirmed: suspects rejected (see :meth:`take_rejected`).
    """

    bounds: Bounds | None
    reorder_window_s: float
    _deadlines: list[tuple[float, str]]

    def __init__(self) -> None:
        """Nothing held, nothing rejected."""
        self._rejected: list[tuple[T, str]] = []
        self.suspects = 0
        self.confirmed = 0
        self.unconfirmed = 0

    def _place(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError  # the arbiter's: emit or hold a position (see there)

    def _reschedule(self, line: Line[T]) -> None:
        raise NotImplementedError  # the arbiter's

    def _suspect(self, line: Line[T], pos: int, item: T, source: str, now: float) -> bool:
        """Holds ``pos`` apart if it is out of bounds; returns whether it did."""
        assert self.bounds is not None
        reason = self.bounds.check(line.hw, pos)
        kind = HARD
        if reason is not None and line.hw == 0 and not reason.startswith("epoch"):
            kind = CONTINUED
        elif reason is None and line.hw > 0 and epoch_of(pos) > epoch_of(line.hw):
            reason, kind = f"a new epoch (from {epoch_of(line.hw)})", QUIET
        if reason is None:
            return False
        if line.suspects is NO_SUSPECTS:
            line.suspects = {}
        line.suspects[pos] = (item, source, now, reason, kind, line.emits)
        self.suspects += 1
        if not line.held and len(line.suspects) == 1:
            line.deadline = now + self.reorder_window_s
            heapq.heappush(self._deadlines, (line.deadline, line.instrument))
        return True

    def _recheck(self, line: Line[T], now: float, out: list[Emission[T]]) -> None:
        assert self.bounds is not None
        for pos in sorted(line.suspects):
            if pos <= line.hw:
                del line.suspects[pos]
                continue
            reason = self.bounds.check(line.hw, pos)
            if reason is None and epoch_of(pos) == epoch_of(line.hw):
                item, source = line.suspects.pop(pos)[:2]
                self._place(line, pos, item, source, now, out=out)
        if not line.suspects:
            line.suspects = NO_SUSPECTS
        self._reschedule(line)

    def take_rejected(self) -> list[tuple[T, str]]:
        """The suspects rejected since the last call, each with its reason (to dead-letter)."""
        rejected, self._rejected = self._rejected, []
        return rejected

    def _decide_suspects(self, line: Line[T], now: float, out: list[Emission[T]]) -> None:
        """Suspects whose window has ended unconfirmed: a new epoch accepted if the line has
        been quiet since it came, a first jump if its next seq came too, the others rejected
        (see the module docstring)."""
        assert self.bounds is not None
        window = self.reorder_window_s
        for pos in sorted(p for p, v in line.suspects.items() if v[2] + window <= now):
            item, source, came, reason, kind, emits = line.suspects.pop(pos)
            if pos <= line.hw:
                continue  # overtaken: a copy at or below the mark
            if epoch_of(pos) == epoch_of(line.hw) and self.bounds.check(line.hw, pos) is None:
                # An earlier suspect accepted in this call brought it within bounds (the next
                # seqs of a new epoch, decided together when the caller runs late).
                self._place(line, pos, item, source, now, out=out, since=came)
                continue
            if (kind == QUIET and line.emits == emits) or (
                kind == CONTINUED and pos + 1 in line.suspects
            ):
                # It has waited its window: held, it is released below with the gap before it.
                self._place(line, pos, item, source, now, out=out, since=came)
                continue
            self.unconfirmed += 1
            why = {
                QUIET: "the current epoch went on",
                CONTINUED: "and nothing continued from it",
            }.get(kind, "no copy from another group")
            self._rejected.append(
                (
                    item,
                    f"{line.instrument} seq {describe(pos)}: {reason}; not confirmed within "
                    f"{window:g} s ({why})",
                )
            )
        if not line.suspects:
            line.suspects = NO_SUSPECTS
