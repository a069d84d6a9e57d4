"""The wire structs (pricing_ha.wire) decode what the real encoders write, field for field."""

from __future__ import annotations

import logging
import time
from collections import Counter
from decimal import Decimal
from typing import Any, cast

import msgspec
import orjson
import pytest
from confluent_kafka import Producer
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace
from opentelemetry.sdk.trace import TracerProvider

from neli.wire import Heartbeat as NeliHeartbeat
from pricing_ha import wire
from pricing_ha.config import AppConfig
from pricing_ha.dedupe import mark_reset
from pricing_ha.dedupe.control import PROBE, RELEASE, TAKEOVER, PartitionView
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.kafka.dead_letter import build_dead_letter
from pricing_ha.kafka.headers import header_dict, is_control
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.publishing.epochs import position
from pricing_ha.publishing.pricing import (
    InstrumentParams,
    InvalidPriceError,
    decode_price,
    encode_price,
    price_quote,
)
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.publishing.quotes import (
    MAX_SEQ,
    InvalidQuoteError,
    Quote,
    encode_quote,
    parse_quote,
)
from pricing_ha.telemetry import PricePathSampler, Telemetry
from pricing_ha.telemetry.pricepath import PricePath
from tests.unit.dedupe.relay_hot_path import RecordingProducer, Relay
from tests.unit.feed.test_feed_producer import run as run_feed
from tests.unit.publishing import test_publisher_commits as pc

symbols = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=64)
quotes = st.builds(
    Quote,
    instrument=symbols,
    seq=st.integers(1, MAX_SEQ),
    bid=st.floats(1e-3, 1e6),
    ask=st.floats(1e-3, 1e6),
    source_time_ns=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 2**63 - 1),
).filter(lambda q: q.bid <= q.ask)
PARAMS = InstrumentParams(spread_bps=2.0, skew_bps=0.5, tick_size=Decimal("0.00001"))


def _fields(obj: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(obj, n) for n in names)


@given(quotes)
def test_encoded_quotes_decode_into_the_quote_struct(q: Quote) -> None:
    """encode_quote's bytes are a wire.Quote with the same fields, as parse_quote reads them."""
    data = encode_quote(q)
    names = ("instrument", "epoch", "seq", "bid", "ask", "source_time_ns")
    assert _fields(msgspec.json.decode(data, type=wire.Quote), names) == _fields(q, names)
    assert parse_quote(data, q.instrument.encode()) == q


@given(quotes)
def test_encoded_prices_decode_into_the_price_struct_and_encode_canonically(q: Quote) -> None:
    """A price's canonical bytes are a wire.Price, and the struct writes the very same bytes."""
    try:
        price = price_quote(q, PARAMS)
    except Exception:  # a bid below one tick: not a price
        return
    data = encode_price(price)
    got = msgspec.json.decode(data, type=wire.Price)
    names = ("instrument", "epoch", "seq", "bid", "ask", "mid", "source_time_ns")
    assert _fields(got, names) == _fields(decode_price(data), names)
    assert msgspec.json.encode(got) == data


def test_a_price_of_an_older_writer_has_epoch_zero_in_both_decoders() -> None:
    """A value without epoch decodes to epoch 0, as decode_price reads it; extra fields are
    ignored; a boolean is not an integer, and seq stops at MAX_SEQ, as for decode_price."""
    doc = {"ask": 2.0, "bid": 1.0, "instrument": "X", "mid": 1.5, "seq": 3, "source_time_ns": 1}
    data = orjson.dumps({**doc, "extra": [1]})
    assert msgspec.json.decode(data, type=wire.Price).epoch == decode_price(data).epoch == 0
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(orjson.dumps({**doc, "seq": True}), type=wire.Price)
    assert (
        msgspec.json.decode(orjson.dumps({**doc, "seq": MAX_SEQ}), type=wire.Price).seq == MAX_SEQ
    )
    too_far = orjson.dumps({**doc, "seq": MAX_SEQ + 1})
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(too_far, type=wire.Price)
    with pytest.raises(InvalidPriceError):
        decode_price(too_far)


def test_an_overlong_instrument_is_refused_by_both_quote_decoders() -> None:
    """65 characters: parse_quote dead-letters the quote, and wire.Quote refuses it."""
    q = Quote(instrument="X" * 65, seq=1, bid=1.0, ask=1.0, source_time_ns=0)
    with pytest.raises(InvalidQuoteError):
        parse_quote(encode_quote(q), q.instrument.encode())
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(encode_quote(q), type=wire.Quote)
    assert msgspec.json.decode(encode_quote(replace(q, instrument="X" * 64)), type=wire.Quote)


def test_publisher_headers_are_raw_price_headers() -> None:
    """The headers a publisher writes on prices.raw convert into RawPriceHeaders."""
    made: list[pc.FakeProducer] = []

    def factory(_config: object) -> pc.FakeProducer:
        made.append(pc.FakeProducer())
        return made[-1]

    worker = QuoteWorker(
        pc.CFG, "p1", "a", lambda _p: True, PublisherStats(), telemetry=Telemetry.noop("test")
    )
    real_consumer, worker.consumer = worker.consumer, pc.FakeConsumer()  # type: ignore[assignment]
    try:
        worker.producer = ReplaceableProducer(
            {"enable.idempotence": True},
            name="test",
            logger=logging.getLogger("t"),
            factory=factory,
        )
        worker.assign(0)
        worker.active.add(0)
        worker.note_read([pc.quote(0, 0)])
        worker.process([pc.quote(1, 10)])
    finally:
        real_consumer.close()
    [record] = made[0].produced
    headers = msgspec.convert(header_dict(record["headers"]), wire.RawPriceHeaders)
    assert (headers.seq, headers.group, headers.member) == ("1", "p1", "a")
    assert int(headers.publish_ns) <= time.time_ns()


def test_relayed_prices_have_price_headers() -> None:
    """What the relay writes on prices: a Price value with PriceHeaders (forged ones gone)."""
    relay = Relay()
    relay.hot.process(
        [
            relay.raw("EURUSD", 1),
            relay.raw("EURUSD", 2, [("group", b"p1"), ("member", b"a"), ("traceparent", b"x")]),
        ]
    )
    records = relay.produced("prices")
    assert len(records) == 2
    for record in records:
        assert not is_control(record["key"], record["headers"])
        assert msgspec.json.decode(record["value"], type=wire.Price).instrument == "EURUSD"
        headers = msgspec.convert(header_dict(record["headers"]), wire.PriceHeaders)
        assert (headers.relay, headers.group) == ("r1", "p1")
        assert headers.traceparent is msgspec.UNSET


def _control_writer() -> tuple[ControlWriter, list[RecordingProducer]]:
    cfg, stats = AppConfig(), RelayStats()
    built: list[RecordingProducer] = []

    def factory(settings: dict[str, Any]) -> Producer:
        built.append(RecordingProducer(settings))
        return cast(Producer, built[-1])

    producers = OutputProducers(
        cfg, "r1", "pricing.relay.raw", stats=stats, producer_factory=factory
    )
    return ControlWriter(cfg, "r1", producers, stats=stats), built


def test_relay_control_records_have_control_headers() -> None:
    """Probes, takeovers, releases (clean and unclean), checkpoints and ticks: no key, and
    ControlHeaders; a checkpoint's value is a Checkpoint."""
    writer, built = _control_writer()
    writer.write_markers([0], PROBE, 0.1)
    writer.write_markers([0, 1], TAKEOVER, 0.1)
    writer.write_markers([0], RELEASE, 0.1, terms={0: 7})
    writer.write_markers([1], RELEASE, 0.1, terms={1: 9}, unclean=[1], below={1: (3, 12.5)})
    writer.write_markers([2], TAKEOVER, 0.1)
    view = PartitionView(position=5, high={"A": 3, "B": position(1717171000000, 2)})
    writer.checkpoint(2, view.encode())
    writer.tick(3)
    records = [r for p in built for r in p.records]
    kinds = []
    for record in records:
        assert record["key"] is None
        assert is_control(record["key"], record["headers"])
        headers = msgspec.convert(header_dict(record["headers"]), wire.ControlHeaders)
        kinds.append((headers.kind, headers.before))
        if headers.kind == "checkpoint":
            got = msgspec.json.decode(record["value"], type=wire.Checkpoint)
            assert got.high == {"A": 3, "B": (1717171000000, 2)}
            assert PartitionView.decode(record["value"], 10) == view
        else:
            assert record["value"] == b""
    unset = msgspec.UNSET
    assert Counter(kinds) == Counter(
        [
            ("probe", unset),
            ("takeover", unset),
            ("takeover", unset),
            ("release", unset),
            ("release", "unclean"),
            ("takeover", unset),
            ("checkpoint", unset),
            ("tick", unset),
        ]
    )


def test_an_operators_reset_has_control_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """reset-mark's record: no key, ControlHeaders of kind reset naming the instrument."""
    made: list[RecordingProducer] = []

    class Recording(RecordingProducer):
        def produce(self, topic: str, **kwargs: Any) -> None:
            super().produce(topic, **kwargs)
            kwargs["on_delivery"](None, type("M", (), {"offset": lambda _s: 4})())

    def producer(config: dict[str, Any], **_kw: Any) -> RecordingProducer:
        made.append(Recording(config))
        return made[-1]

    monkeypatch.setattr(mark_reset, "Producer", producer)
    mark_reset.write_reset(AppConfig(), "EURUSD", operator="ops@host")
    [record] = made[0].records
    assert is_control(record.get("key"), record["headers"])
    headers = msgspec.convert(header_dict(record["headers"]), wire.ControlHeaders)
    assert (headers.kind, headers.instrument, headers.operator) == ("reset", "EURUSD", "ops@host")


def test_dead_letter_headers_are_dead_letter_headers() -> None:
    """build_dead_letter's headers (publisher's and relay's) convert into DeadLetterHeaders."""
    for identity in ([("group", b"p1"), ("member", b"a")], [("relay", b"r1")]):
        letter = build_dead_letter(
            reason="x" * 1000,
            source_topic="md.quotes",
            source_partition=3,
            source_offset=42,
            key=None,
            value=b"v" * 70_000,
            identity=identity,
        )
        headers = msgspec.convert(header_dict(letter.headers), wire.DeadLetterHeaders)
        assert (headers.source_offset, headers.original_key_size) == ("42", "-1")
        assert headers.truncated == "true"


@pytest.mark.parametrize("since", [None, 1717171717.25])
def test_neli_heartbeats_decode_into_the_heartbeat_struct(since: float | None) -> None:
    """neli's heartbeat bytes are a wire.Heartbeat with the same fields."""
    hb = NeliHeartbeat(
        group="pricing.p1",
        member_id="m/1",
        member_name="a",
        incarnation=2,
        counter=9,
        sent_mono=12.5,
        sent_wall=1717171717.5,
        led=(0, 3),
        meta={"traceparent": "00-x", "n": 1},
        since=since,
    )
    got = msgspec.json.decode(hb.encode(), type=wire.Heartbeat)
    assert (got.group, got.member_id, got.led, got.meta, got.since) == (
        "pricing.p1",
        "m/1",
        [0, 3],
        {"traceparent": "00-x", "n": 1},
        since,
    )


def test_the_feeds_records_are_quotes_with_quote_headers() -> None:
    """What the feed sends: a Quote value keyed by its instrument; a sampled one's headers are
    QuoteHeaders with a traceparent."""
    provider = TracerProvider(sampler=PricePathSampler(0.01))
    try:
        draws = iter([0.0, 0.9] * 2)
        path = PricePath(provider.get_tracer("t"), 0.5, rng=lambda: next(draws))
        _, producer = run_feed(rate_hz=0, count=4, price_path=path)
    finally:
        provider.shutdown()
    assert len(producer.sent) == 4
    traced = 0
    for call in producer.sent:
        quote = msgspec.json.decode(call["value"], type=wire.Quote)
        assert call["key"] in (quote.instrument, quote.instrument.encode())
        headers = msgspec.convert(header_dict(call.get("headers")), wire.QuoteHeaders)
        traced += headers.traceparent is not msgspec.UNSET
    assert traced == 2


def test_the_wire_bounds_are_the_publishers_bounds() -> None:
    """The seq, epoch and symbol bounds the structs state are the ones publishing enforces."""
    from pricing_ha.publishing import epochs, quotes
    from pricing_ha.wire import _values

    assert (_values.MAX_SEQ, _values.MAX_EPOCH) == (quotes.MAX_SEQ, epochs.MAX_EPOCH)
    assert _values.MAX_SYMBOL_LEN == quotes._MAX_SYMBOL_LEN
