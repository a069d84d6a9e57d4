"""The subscriber's own check of the delivered stream orders by (epoch, seq)."""

from __future__ import annotations

from pricing_ha.subscribing.stats import InstrumentStats


def test_a_new_epoch_from_seq_1_is_in_order_and_an_older_epoch_is_not() -> None:
    """E1 1..3 then E2 1..2: no gap, nothing out of order; E1 again is out of order."""
    s = InstrumentStats()
    for seq in (1, 2, 3):
        s.on_delivered(seq, 0.0, epoch=100)
    for seq in (1, 2):
        s.on_delivered(seq, 0.0, epoch=200)
    assert (s.gaps, s.out_of_order, s.last_seq, s.last_epoch) == (0, 0, 2, 200)
    s.on_delivered(4, 0.0, epoch=100)
    assert (s.out_of_order, s.last_seq, s.last_epoch) == (1, 2, 200)


def test_a_new_epoch_starting_late_counts_the_missing_seqs_as_a_gap() -> None:
    """A new epoch whose first delivery is seq 4 misses seqs 1..3 of it."""
    s = InstrumentStats()
    s.on_delivered(9, 0.0, epoch=100)
    s.on_delivered(4, 0.0, epoch=200)
    assert (s.gaps, s.gap_events, s.out_of_order) == (3, 1, 0)


def test_a_reset_mark_restarts_the_check() -> None:
    """After an operator's reset, a delivery below the old mark is in order."""
    s = InstrumentStats()
    s.on_delivered(2**63 - 1, 0.0, epoch=100)
    s.reset_mark()
    s.on_delivered(12, 0.0, epoch=100)
    assert (s.out_of_order, s.last_seq) == (0, 12)
