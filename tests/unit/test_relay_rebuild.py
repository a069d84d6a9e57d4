"""The relay's high-water rebuild over a fake consumer: read up to the takeover marker."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition

from pricing_ha.dedupe import records as relay_records
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.publishing.pricing import Price, encode_price


def price(instrument: str, seq: int, offset: int) -> Message:
    """A record of ``prices`` as the relay emits it."""
    p = Price(instrument=instrument, seq=seq, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
    return Message(
        topic="prices",
        partition=0,
        offset=offset,
        key=instrument.encode(),
        value=encode_price(p),
        headers=[("seq", str(seq).encode())],
    )


class ScanConsumer:
    """Serves ``records`` once, then nothing; claims the watermark ``high``."""

    def __init__(self, records: list[Message], high: int) -> None:
        """Records to serve and the watermark to report."""
        self.records = records
        self.high = high
        self.closed = False

    def get_watermark_offsets(self, tp: TopicPartition, **_: Any) -> tuple[int, int]:
        """The end must be learned by reading up to the marker, never by asking."""
        raise AssertionError(f"watermarks asked for {tp}; this broker's ({self.high}) lag")

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Accept the assignment."""

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Everything on the first call, then nothing (after the timeout)."""
        taken, self.records = self.records, []
        if not taken:
            time.sleep(min(timeout, 0.01))
        return taken

    def close(self) -> None:
        """Remember the close."""
        self.closed = True


def _scan(
    monkeypatch: pytest.MonkeyPatch, consumer: ScanConsumer, *, end: int, timeout_s: float = 5.0
) -> dict[str, int]:
    monkeypatch.setattr(relay_records, "Consumer", lambda *_a, **_k: consumer)
    return relay_records.rebuild_high_water({}, "prices", 0, end_offset=end, timeout_s=timeout_s)


def marker(offset: int) -> Message:
    """A takeover marker as a relay writes it (control record, no key, empty value)."""
    return Message(
        topic="prices",
        partition=0,
        offset=offset,
        key=None,
        value=b"",
        headers=[(CONTROL_HEADER, b"takeover")],
    )


def test_marks_are_each_instruments_highest_seq_below_the_marker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every instrument's highest seq before the marker becomes its mark; the consumer closes."""
    records = [
        price("EURUSD", 1, 0),
        marker(1),  # an earlier takeover's marker: skipped
        price("AAPL", 7, 2),
        price("EURUSD", 2, 3),
        marker(4),  # this takeover's marker
        price("EURUSD", 9, 5),  # written after the marker: not part of the rebuild
    ]
    consumer = ScanConsumer(records, high=3)  # a watermark that lags the data is not asked
    assert _scan(monkeypatch, consumer, end=4) == {"EURUSD": 2, "AAPL": 7}
    assert consumer.closed


def test_a_marker_never_reached_fails_instead_of_returning_partial_marks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If the scan cannot reach the marker in time, the takeover fails: no partial marks."""
    consumer = ScanConsumer([price("EURUSD", 4, 0), price("EURUSD", 5, 1)], high=2)
    t0 = time.monotonic()
    with pytest.raises(relay_records.RebuildError, match="marker at 40"):
        _scan(monkeypatch, consumer, end=40, timeout_s=0.3)
    assert 0.3 <= time.monotonic() - t0 < 5.0
    assert consumer.closed


def test_an_empty_partition_ends_at_its_marker_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition holding only the new marker rebuilds to no marks without waiting."""
    consumer = ScanConsumer([marker(0)], high=0)
    t0 = time.monotonic()
    assert _scan(monkeypatch, consumer, end=0) == {}
    assert time.monotonic() - t0 < 1.0
