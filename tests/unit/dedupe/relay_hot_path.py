"""A relay hot path over fakes: its real output, a recording producer, no broker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from confluent_kafka import Message, Producer

from pricing_ha.config import AppConfig, LimitsConfig
from pricing_ha.dedupe.hot_path import HotPath
from pricing_ha.dedupe.output import RelayOutput
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.raw_input import RawInput
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.publishing.pricing import Price, encode_price
from pricing_ha.telemetry import Telemetry
from tests.unit.kafka.producer_fakes import FakeProducer


class RecordingProducer(FakeProducer):
    """Remembers what was produced where; its transactions always begin and commit."""

    def __init__(self, config: dict[str, Any]) -> None:
        """Nothing produced yet."""
        super().__init__(config)
        self.records: list[dict[str, Any]] = []

    def produce(self, topic: str, **kwargs: Any) -> None:
        """Remember the record (topic, key, value, headers...)."""
        self.records.append({"topic": topic, **kwargs})

    def init_transactions(self, timeout: float = 0) -> None:
        """Fence the partition's previous producer (nobody here)."""

    def begin_transaction(self) -> None:
        """Begin a transaction."""

    def commit_transaction(self, timeout: float = 0) -> None:
        """Commit the open transaction."""


class Relay:
    """A hot path owning partition 0 of ``prices.raw`` (fenced), and what it produced."""

    def __init__(self, max_instruments: int = 8000, *, handing_over: bool = False) -> None:
        """Partition 0 taken up from no marks (being handed over, if ``handing_over``)."""
        self.cfg = AppConfig(
            limits=LimitsConfig(max_instruments_per_partition=max_instruments),
        )
        self.stats = RelayStats()
        self.built: list[RecordingProducer] = []
        self.dropped: list[int] = []

        def factory(settings: dict[str, Any]) -> Producer:
            self.built.append(RecordingProducer(settings))
            return cast(Producer, self.built[-1])  # stands in for the concrete producer

        producers = OutputProducers(
            self.cfg, "r1", "pricing.relay.raw", stats=self.stats, producer_factory=factory
        )
        producers.fences.fence([0], 1.0)  # as a takeover does
        self.producers = producers
        out = RelayOutput(
            self.cfg,
            "r1",
            "pricing.relay.raw",
            producers,
            lambda _p: True,
            stats=self.stats,
            telemetry=Telemetry.noop("test"),
        )
        raw = SimpleNamespace(commits=lambda *_a: [], rewind=lambda *_a: True)
        read_ahead = SimpleNamespace(reading=lambda: False, skipping=False, replaying=False)
        self.hot = HotPath(
            out,
            cast(RawInput, raw),
            cast(ReadAhead, read_ahead),
            window_s=0.5,
            may_emit=lambda _p: True,
            handing_over=lambda _p: handing_over,
            asked=lambda _p: False,
            active={0},
            drop=self.dropped.append,
            commit=lambda _c: None,
            limits=self.cfg.limits,
        )
        self.hot.take_up(0, {})
        self.offset = 0

    def raw(
        self,
        instrument: str,
        seq: int,
        headers: list[tuple[str, Any]] | None = None,
        value: bytes | None = None,
    ) -> Message:
        """A raw price of ``instrument`` at the next offset."""
        price = Price(instrument=instrument, seq=seq, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
        self.offset += 1
        return Message(
            topic="prices.raw",
            partition=0,
            offset=self.offset,
            key=instrument.encode(),
            value=encode_price(price) if value is None else value,
            headers=[("group", b"p1"), ("member", b"a")] if headers is None else headers,
        )

    def produced(self, topic: str) -> list[dict[str, Any]]:
        """Every record produced to ``topic``, in order."""
        return [r for p in self.built for r in p.records if r["topic"] == topic]
