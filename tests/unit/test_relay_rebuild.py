"""The relay's high-water rebuild over a fake consumer: read to the end, bounded by silence."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition

from pricing_ha.dedupe import records as relay_records
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
        """The scripted watermarks."""
        return 0, self.high

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


def _scan(monkeypatch: pytest.MonkeyPatch, consumer: ScanConsumer) -> tuple[dict[str, int], float]:
    monkeypatch.setattr(relay_records, "Consumer", lambda *_a, **_k: consumer)
    t0 = time.monotonic()
    marks = relay_records.rebuild_high_water({}, "prices", 0)
    return marks, time.monotonic() - t0


def test_marks_are_each_instruments_highest_seq(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every instrument's highest seq on the partition becomes its mark; the consumer is closed."""
    records = [price("EURUSD", 1, 0), price("AAPL", 7, 1), price("EURUSD", 2, 2)]
    consumer = ScanConsumer(records, high=3)
    marks, _ = _scan(monkeypatch, consumer)
    assert marks == {"EURUSD": 2, "AAPL": 7}
    assert consumer.closed


def test_a_watermark_past_the_last_record_does_not_stall_the_takeover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A watermark promising records that never come ends the scan after the silence bound."""
    monkeypatch.setattr(relay_records, "_REBUILD_HINT_IDLE_S", 0.3)
    consumer = ScanConsumer([price("EURUSD", 4, 0), price("EURUSD", 5, 1)], high=50)
    marks, took = _scan(monkeypatch, consumer)
    assert marks == {"EURUSD": 5}
    assert 0.3 <= took < 5.0
