"""Sequence positions: a quote's ``(epoch, seq)`` as one ordered integer, and the bounds on it.

The feed numbers each instrument's quotes ``seq`` = 1, 2, 3, ... from its start, and stamps them
with its **epoch**: its start time in Unix milliseconds. A restarted feed starts a new, larger
epoch and numbers from 1 again, so everything downstream orders quotes and prices by
``(epoch, seq)``, lexicographically. A record without an epoch (an older feed) has epoch 0.

:func:`position` packs the pair into one integer with the same order (``epoch << 63 | seq``;
``seq`` < 2^63), so the relay's marks, its arbiter and its checkpoints keep comparing plain
integers, and a mark of epoch 0 is its seq unchanged.

:func:`out_of_bounds` is the one rule for a record that must not move a mark on its own word:
an epoch further ahead of the reader's clock than a skew bound, or a forward jump in ``seq``
larger than a jump bound (a new epoch counts from 0). Publishers and the relay apply it each in
their own way (:class:`pricing_ha.publishing.quotes.SequenceGuard`,
:mod:`pricing_ha.dedupe.arbitration`).
"""

from __future__ import annotations

__all__ = [
    "MAX_EPOCH",
    "SEQ_BITS",
    "describe",
    "epoch_of",
    "out_of_bounds",
    "position",
    "seq_in_epoch",
]

SEQ_BITS = 63
"""``seq`` is below 2^63, so ``epoch << SEQ_BITS | seq`` orders by epoch, then seq."""

MAX_EPOCH = 2**63 - 1
"""Largest accepted epoch (it must fit Spark ``LongType`` and Parquet int64, like ``seq``)."""

_SEQ_MASK = (1 << SEQ_BITS) - 1


def position(epoch: int, seq: int) -> int:
    """``(epoch, seq)`` as one integer ordered as the pair is (epoch 0: ``seq`` itself)."""
    return (epoch << SEQ_BITS) | seq


def epoch_of(pos: int) -> int:
    """The epoch of a :func:`position`."""
    return pos >> SEQ_BITS


def seq_in_epoch(pos: int) -> int:
    """The seq of a :func:`position`."""
    return pos & _SEQ_MASK


def describe(pos: int) -> str:
    """A position for humans: ``"17"`` in epoch 0, else ``"17@1717171717000"``."""
    epoch = epoch_of(pos)
    return str(seq_in_epoch(pos)) if epoch == 0 else f"{seq_in_epoch(pos)}@{epoch}"


def out_of_bounds(
    mark: int, pos: int, *, now_ms: int, max_seq_jump: int, max_epoch_skew_ms: int
) -> str | None:
    """Why ``pos`` may not move ``mark`` (0: none) on its own word, or ``None`` if it may.

    Args:
        mark: the highest position accepted so far (0 if none).
        pos: the offered position, above ``mark``.
        now_ms: the reader's clock, Unix milliseconds.
        max_seq_jump: the largest forward step in ``seq`` accepted unconfirmed (a new epoch
            steps from 0, so its first seq may be at most this).
        max_epoch_skew_ms: how far an epoch may be ahead of ``now_ms``.

    Returns:
        A short reason, or ``None``.
    """
    epoch, seq = epoch_of(pos), seq_in_epoch(pos)
    if epoch > now_ms + max_epoch_skew_ms:
        ahead = epoch - now_ms
        return f"epoch {epoch} is {ahead} ms ahead of the clock (bound {max_epoch_skew_ms})"
    base = seq_in_epoch(mark) if mark and epoch_of(mark) == epoch else 0
    if seq - base > max_seq_jump:
        where = "in its epoch" if base else "from the epoch's start"
        return f"seq jumps by {seq - base} {where} (bound {max_seq_jump})"
    return None
