"""The subscriber's own check of the delivered stream orders by (epoch, seq); resets."""

from __future__ import annotations

from confluent_kafka import Message

from pricing_ha.dedupe.control import RESET
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.subscribing.stats import InstrumentStats
from tests.unit.subscribing.test_subscriber import pairs, raw, started


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


async def test_a_reset_record_on_prices_restarts_the_subscribers_check() -> None:
    """After an operator's reset record, prices below the old mark are delivered again."""
    sub, fake = await started()
    reset = Message(
        topic="t",
        partition=0,
        offset=3,
        key=None,
        value=b"",
        headers=[(CONTROL_HEADER, RESET), ("instrument", b"X")],
    )
    fake.batches = [[raw("X", 2**62), raw("X", 7)], [reset, raw("X", 8)]]
    assert pairs(await sub.poll(0.1)) == [("X", 2**62)]
    assert pairs(await sub.poll(0.1)) == [("X", 8)]
    x = sub.stats.instruments["X"]
    assert (x.delivered, x.duplicates, x.out_of_order) == (2, 1, 0)
    await sub.close()
