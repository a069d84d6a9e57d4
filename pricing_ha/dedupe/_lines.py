"""The state of arbitration: one line per instrument, what it emits, and the bounds.

The data of :mod:`.arbitration` (which holds the logic): :class:`Emission`, what the arbiter
releases; :class:`Bounds`, how far one copy may move a mark unconfirmed; ``_Line``, one
instrument's state; and the two rules of position it applies (:func:`successor`, :func:`group_of`).
Positions are ``(epoch, seq)`` packed (:mod:`pricing_ha.publishing.epochs`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from pricing_ha.publishing.epochs import epoch_of, out_of_bounds, seq_in_epoch

__all__ = [
    "CONTINUED",
    "HARD",
    "NOTHING_HELD",
    "NO_SUSPECTS",
    "QUIET",
    "Bounds",
    "Emission",
    "Line",
    "group_of",
    "successor",
]

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
        epoch: the source's epoch (0: none).
    """

    instrument: str
    seq: int
    item: T
    source: str
    gap_before: int
    switched_from: str | None
    silence_s: float
    dropped_since_switch: int
    epoch: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Bounds:
    """How far one copy may move a mark unconfirmed (``[sequence]``; see the module docstring).

    Attributes:
        max_seq_jump: the largest forward step in seq (a later epoch: from 0).
        max_epoch_skew_ms: how far an epoch may be ahead of ``clock_ms()``.
        clock_ms: the wall clock, Unix milliseconds.
    """

    max_seq_jump: int
    max_epoch_skew_ms: int
    clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000

    def check(self, mark: int, pos: int) -> str | None:
        """Why ``pos`` may not move ``mark`` unconfirmed, or ``None``
        (:func:`pricing_ha.publishing.epochs.out_of_bounds`, on ``clock_ms()``)."""
        return out_of_bounds(
            mark,
            pos,
            now_ms=self.clock_ms(),
            max_seq_jump=self.max_seq_jump,
            max_epoch_skew_ms=self.max_epoch_skew_ms,
        )


# The ``held`` of every line that holds nothing: one shared, never-written empty dict, so an
# instrument costs no dict of its own until it holds something (64 bytes each otherwise, about
# a quarter of a line). A line gets a private dict on its first held item and gives it back
# when it empties. Nothing writes through this object: see ``Arbiter.offer``
# (:mod:`.arbitration`).
NOTHING_HELD: dict[int, tuple[Any, str, float]] = {}
# The same for suspects: position -> (item, source, arrival, reason, kind, emitted at arrival)
NO_SUSPECTS: dict[int, tuple[Any, str, float, str, int, int]] = {}

# What an unconfirmed suspect needs once its window ends (see :mod:`.arbitration`).
HARD = 0  # nothing: it is rejected
QUIET = 1  # the line emitted nothing since it came
CONTINUED = 2  # a copy of the next seq came too


class Line(Generic[T]):
    """The arbitration state of one instrument."""

    __slots__ = (
        "deadline",
        "dropped",
        "emits",
        "held",
        "hw",
        "instrument",
        "last_emit",
        "primary",
        "primary_seq",
        "suspects",
    )

    def __init__(self, instrument: str) -> None:
        self.instrument = instrument
        self.hw = 0  # highest position emitted or set (0: none)
        # seq -> (item, source, arrival); the shared empty dict while nothing is held
        self.held: dict[int, tuple[T, str, float]] = NOTHING_HELD
        self.deadline = 0.0  # when the oldest held item's window ends (if any are held)
        self.primary = ""  # "" until the first emission
        self.primary_seq = 0  # highest seq offered by the primary
        self.last_emit = 0.0
        self.dropped = 0
        self.emits = 0
        self.suspects: dict[int, tuple[T, str, float, str, int, int]] = NO_SUSPECTS


def group_of(source: str) -> str:
    """The group of a source ``group/member``."""
    return source.rsplit("/", 1)[0]


def successor(hw: int, pos: int) -> bool:
    """Whether ``pos`` comes right after ``hw``: the next seq, or seq 1 of a later epoch."""
    return pos == hw + 1 or (seq_in_epoch(pos) == 1 and epoch_of(pos) > epoch_of(hw))
