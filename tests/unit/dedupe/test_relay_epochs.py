"""The standby's marks by (epoch, seq), in checkpoints too, and operators' resets of a mark."""

from __future__ import annotations

import orjson

from pricing_ha.dedupe.control import CHECKPOINT, RESET, PartitionView
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.publishing.epochs import position
from pricing_ha.publishing.pricing import Price, encode_price
from tests.unit.dedupe.standby_log import Log, read_to_end, tail_of

E1, E2 = 1_700_000_000_000, 1_700_000_900_000


def _price(log: Log, partition: int, instrument: str, seq: int, epoch: int) -> int:
    p = Price(
        instrument=instrument, seq=seq, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5, epoch=epoch
    )
    # A stale seq header, as an older relay copied it: the value decides.
    headers = [("seq", b"999999")]
    return log.append(partition, key=instrument.encode(), value=encode_price(p), headers=headers)


def _reset(log: Log, partition: int, instrument: str) -> int:
    headers = [(CONTROL_HEADER, RESET), ("instrument", instrument.encode())]
    return log.append(partition, key=None, value=b"", headers=headers)


def test_a_restarted_feed_moves_the_rebuilt_mark_to_its_new_epoch() -> None:
    """Prices of epoch E2 from seq 1 after E1 seq 900: the mark is (E2, 2), not seq 900."""
    log = Log(1)
    for seq in (899, 900):
        _price(log, 0, "X", seq, E1)
    _price(log, 0, "X", 1, E2)
    _price(log, 0, "X", 2, E2)
    tail = tail_of(log)
    read_to_end(tail, log)
    assert tail.views[0].high == {"X": position(E2, 2)}


def test_a_checkpoint_carries_epoch_marks_and_reads_old_plain_marks() -> None:
    """Marks of a later epoch round-trip as [epoch, seq]; epoch-0 marks stay plain ints."""
    view = PartitionView(position=7, high={"X": position(E2, 3), "OLD": 42})
    doc = orjson.loads(view.encode())
    assert doc["high"] == {"X": [E2, 3], "OLD": 42}
    back = PartitionView.decode(view.encode(), offset=7)
    assert back is not None
    assert back.high == view.high
    bad = view.encode().replace(b"[%d,3]" % E2, b"[-1,3]")
    assert PartitionView.decode(bad, offset=7) is None


def test_a_reset_record_forgets_the_mark_and_is_queued_for_the_owner() -> None:
    """A reset drops the instrument's mark from every view; the owner gets it once, by offset."""
    log = Log(1)
    _price(log, 0, "X", 2**63 - 1, E1)  # a poisoned mark
    _price(log, 0, "Y", 5, E1)
    at = _reset(log, 0, "X")
    _price(log, 0, "X", 11, E1)
    tail = tail_of(log)
    read_to_end(tail, log)
    assert tail.views[0].high == {"X": position(E1, 11), "Y": position(E1, 5)}
    assert tail.resets_after(0, -1) == [(at, "X")]
    assert tail.resets_after(0, -1) == []  # taken
    _reset(log, 0, "Y")
    read_to_end(tail, log)
    assert tail.resets_after(0, at + 5) == []  # below the offset the owner's marks came from


def test_a_checkpoint_after_a_reset_resumes_a_joiner_without_the_mark() -> None:
    """The reset survives a restart: a joiner resuming from a later checkpoint lacks the mark."""
    log = Log(1)
    _price(log, 0, "X", 2**62, E1)
    _reset(log, 0, "X")
    _price(log, 0, "Y", 1, E1)
    writer = tail_of(log, token="r2/xyz")
    read_to_end(writer, log)
    got = writer.checkpoint(0, -1)
    assert got is not None
    log.append(0, key=None, value=got[0], headers=[(CONTROL_HEADER, CHECKPOINT)])
    joiner = tail_of(log, token="r1/new", resume=True)
    read_to_end(joiner, log)
    assert joiner.resumed
    assert joiner.views[0].high == {"Y": position(E1, 1)}
