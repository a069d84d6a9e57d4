"""Price-path tracing, fail-over spans and hot-path metrics, in memory (no broker)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, SpanKind, StatusCode

from pricing_ha.cli._options import with_az
from pricing_ha.config import AppConfig
from pricing_ha.dedupe.arbitration import Arbiter, Emission
from pricing_ha.dedupe.failover_spans import trace_switch
from pricing_ha.errors import ConfigError
from pricing_ha.telemetry import PricePathSampler, PricingMetrics, PrometheusExposition, Telemetry
from pricing_ha.telemetry.pricepath import (
    PricePath,
    child_context,
    end_on_delivery,
    sampled_context,
    traceparent_of,
    with_traceparent,
)
from pricing_ha.telemetry.tally import PriceTally
from tests.unit.telemetry.prometheus_format import parse, value

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"


class _Traced:
    """A tracer provider with the application's sampler, keeping finished spans in memory."""

    def __init__(self, ratio: float) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(sampler=PricePathSampler(ratio))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test")

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name in (None, s.name)]


@pytest.fixture
def traced() -> Iterator[_Traced]:
    """Price-path roots sampled at 1 % by the SDK itself."""
    t = _Traced(0.01)
    yield t
    t.provider.shutdown()


def _ids(span: ReadableSpan) -> tuple[str, str]:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def _recorded(span: Span) -> SdkSpan:
    """A span the SDK records (the API's type shows neither its name, parent nor attributes)."""
    assert isinstance(span, SdkSpan)
    return span


@pytest.mark.parametrize(
    "headers",
    [
        None,
        [],
        [("seq", b"1")],
        [("traceparent", f"00-{TRACE}-{SPAN}-00".encode())],  # not sampled
        [("traceparent", b"00-zz-nonsense-01")],
        [("traceparent", f"00-{'0' * 32}-{SPAN}-01".encode())],  # invalid trace id
    ],
)
def test_records_without_a_sampled_traceparent_have_no_context(headers: Any) -> None:
    """No header, an unsampled or a malformed traceparent: the record is not traced."""
    assert sampled_context(headers) is None


@pytest.mark.parametrize(
    "headers",
    [
        [("seq", b"1"), ("traceparent", f"00-{TRACE}-{SPAN}-01".encode())],
        {"traceparent": f"00-{TRACE}-{SPAN}-01"},
        [("traceparent", f"00-{TRACE}-{SPAN}-03")],
    ],
)
def test_a_sampled_traceparent_gives_the_senders_context(headers: Any) -> None:
    """Bytes or text, list or dict headers: the context names the remote sender, sampled."""
    ctx = sampled_context(headers)
    assert ctx is not None
    sc = trace.get_current_span(ctx).get_span_context()
    assert (f"{sc.trace_id:032x}", f"{sc.span_id:016x}") == (TRACE, SPAN)
    assert sc.is_remote
    assert sc.trace_flags.sampled


def test_with_traceparent_replaces_the_previous_context_and_keeps_the_rest() -> None:
    """A relay's output carries its own traceparent, not the publisher's, and no tracestate."""
    headers = [("seq", b"7"), ("traceparent", b"old"), ("tracestate", b"x=1"), ("group", b"p1")]
    assert with_traceparent(headers, b"new") == [
        ("seq", b"7"),
        ("group", b"p1"),
        ("traceparent", b"new"),
    ]


def test_sample_root_draws_the_ratio_without_touching_the_rng_at_0_and_1() -> None:
    """Ratio 0 never samples, 1 always; in between the draw decides."""
    draws = iter([0.3, 0.1, 0.24999, 0.9])

    def rng() -> float:
        return next(draws)

    tracer = trace.NoOpTracer()
    assert not any(PricePath(tracer, 0.0, rng=rng).sample_root() for _ in range(5))
    assert all(PricePath(tracer, 1.0, rng=rng).sample_root() for _ in range(5))
    quarter = PricePath(tracer, 0.25, rng=rng)
    assert [quarter.sample_root() for _ in range(4)] == [False, True, True, False]


def test_a_root_the_caller_sampled_is_recorded_despite_a_low_ratio(traced: _Traced) -> None:
    """PricePath roots are recorded (no second draw); plain SDK roots still follow the ratio."""
    path = PricePath(traced.tracer, 0.01)
    for _ in range(20):
        path.start_send("md.quotes", None, key="EURUSD").end()
        traced.tracer.start_span("send md.quotes", kind=SpanKind.PRODUCER).end()
    recorded = traced.spans("send md.quotes")
    assert 20 <= len(recorded) < 30  # ours, plus perhaps a lucky SDK-sampled root


def test_one_trace_follows_a_price_through_the_headers(traced: _Traced) -> None:
    """feed send -> publisher process -> send -> relay process -> send: one parent chain."""
    path = PricePath(traced.tracer, 0.01)
    feed = path.start_send("md.quotes", None, key="EURUSD", attributes={"pricing_ha.seq": 9})
    headers: list[tuple[str, Any]] = [("traceparent", traceparent_of(feed))]
    feed.end()
    chain = [_recorded(feed)]
    for consumed, produced, group in (
        ("md.quotes", "prices.raw", "pricing.p1.quotes"),
        ("prices.raw", "prices", "pricing.relay.raw"),
    ):
        parent = sampled_context(headers)
        assert parent is not None
        process = path.start_process(
            consumed, parent, partition=2, offset=41, key="EURUSD", consumer_group=group
        )
        send = path.start_send(produced, child_context(process), key="EURUSD", partition=2)
        headers = with_traceparent([("seq", b"9"), *headers], traceparent_of(send))
        send.end()
        process.end()
        chain += [_recorded(process), _recorded(send)]
    by_id = {_ids(s)[1]: s for s in traced.spans()}
    assert len(by_id) == 5
    assert len({_ids(s)[0] for s in by_id.values()}) == 1
    for child, parent_span in itertools.pairwise(reversed(chain)):
        assert child.parent is not None
        assert f"{child.parent.span_id:016x}" == _ids(by_id[_ids(parent_span)[1]])[1]
    assert [s.name for s in chain] == [
        "send md.quotes",
        "process md.quotes",
        "send prices.raw",
        "process prices.raw",
        "send prices",
    ]
    relay_process = by_id[_ids(chain[3])[1]]
    assert relay_process.kind is SpanKind.CONSUMER
    assert dict(relay_process.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "prices.raw",
        "messaging.destination.partition.id": "2",
        "messaging.consumer.group.name": "pricing.relay.raw",
        "messaging.kafka.offset": 41,
        "messaging.kafka.message.key": "EURUSD",
    }
    assert chain[-1].kind is SpanKind.PRODUCER
    assert headers[-1][1] == traceparent_of(chain[-1])


def test_send_spans_end_on_delivery_with_the_offset_or_the_error(traced: _Traced) -> None:
    """Delivered: partition and offset set; failed: ERROR status; the next callback runs."""
    path = PricePath(traced.tracer, 1.0)
    calls: list[Any] = []
    ok = path.start_send("prices", None, key="EURUSD")
    end_on_delivery(ok, lambda err, msg: calls.append(err))(
        None, SimpleNamespace(partition=lambda: 3, offset=lambda: 77)
    )
    failed = path.start_send("prices", None, key="EURUSD")
    error = KafkaError(KafkaError._MSG_TIMED_OUT)
    end_on_delivery(failed)(error, None)
    ok_span, failed_span = traced.spans("send prices")
    assert ok_span.attributes is not None
    assert ok_span.attributes["messaging.destination.partition.id"] == "3"
    assert ok_span.attributes["messaging.kafka.offset"] == 77
    assert failed_span.status.status_code is StatusCode.ERROR
    assert calls == [None]


def _switch() -> Emission[None]:
    return Emission("EURUSD", 42, None, "p2-x/a", 1, "p1-x/b", 0.25, 6)


def test_a_switch_span_is_a_root_always_recorded_with_from_to_gap_and_overlap() -> None:
    """With price sampling at 0 and an unsampled current span, the switch is still recorded."""
    t = _Traced(0.0)
    unsampled = trace.NonRecordingSpan(
        trace.SpanContext(1, 2, is_remote=True, trace_flags=trace.TraceFlags(0))
    )
    price = trace.SpanContext(5, 6, is_remote=False, trace_flags=trace.TraceFlags(1))
    with trace.use_span(unsampled):
        trace_switch(
            t.tracer,
            _switch(),
            stage="relay",
            partition=3,
            observer="r1",
            at_ns=10_000_000_000,
            price_span=price,
        )
    (span,) = t.spans()
    assert span.name == "relay.switch EURUSD"
    assert span.kind is SpanKind.INTERNAL
    assert span.parent is None
    assert (span.start_time, span.end_time) == (9_750_000_000, 10_000_000_000)
    assert dict(span.attributes or {}) == {
        "pricing_ha.stage": "relay",
        "pricing_ha.instrument": "EURUSD",
        "pricing_ha.seq": 42,
        "pricing_ha.switch.from": "p1-x/b",
        "pricing_ha.switch.to": "p2-x/a",
        "pricing_ha.switch.from_group": "p1-x",
        "pricing_ha.switch.to_group": "p2-x",
        "pricing_ha.switch.gap_seq": 1,
        "pricing_ha.switch.silence_s": 0.25,
        "pricing_ha.switch.duplicates_dropped": 6,
        "messaging.destination.partition.id": "3",
        "pricing_ha.partition": 3,
        "pricing_ha.observer": "r1",
    }
    assert [(lk.context.trace_id, lk.context.span_id) for lk in span.links] == [(5, 6)]
    t.provider.shutdown()


def test_arbiter_switches_become_spans_with_the_arbiters_figures() -> None:
    """A real Arbiter fail-over (P1 stops, P2 goes on) yields one span per instrument."""
    t = _Traced(0.0)
    arbiter: Arbiter[None] = Arbiter(0.5)
    out: list[Emission[None]] = []
    for seq in range(1, 4):
        out += arbiter.offer("EURUSD", seq, None, "p1/a", seq * 0.1)
        out += arbiter.offer("EURUSD", seq, None, "p2/a", seq * 0.1 + 0.01)
    for seq in (4, 5):  # P1 is gone
        out += arbiter.offer("EURUSD", seq, None, "p2/a", seq * 0.1)
    for e in out:
        if e.switched_from is not None:
            trace_switch(t.tracer, e, stage="relay", partition=0, observer="r1")
    (span,) = t.spans()
    attrs = dict(span.attributes or {})
    assert (attrs["pricing_ha.switch.from"], attrs["pricing_ha.switch.to"]) == ("p1/a", "p2/a")
    assert attrs["pricing_ha.seq"] == 5
    assert attrs["pricing_ha.switch.duplicates_dropped"] == 3
    assert attrs["pricing_ha.switch.gap_seq"] == 0
    assert attrs["pricing_ha.switch.silence_s"] == pytest.approx(0.1)
    t.provider.shutdown()


def test_tally_flushes_counts_latency_samples_and_staleness_per_batch() -> None:
    """One add per partition, at most N latency values, staleness set and forgotten."""
    reader = PrometheusExposition()
    provider = MeterProvider(metric_readers=[reader.reader])
    now = [1000.0]
    metrics = PricingMetrics(provider.get_meter("t"), clock=lambda: now[0], per_instrument=True)
    tally = PriceTally(
        metrics,
        metrics.prices_published,
        stage="publish",
        attributes={"group": "p1"},
        max_latency_samples=4,
        clock=lambda: now[0],
    )
    for i in range(10):
        tally.add(i % 2, f"I{i % 2}", 0.001 * i, None)  # an instrument stays on its partition
    tally.add(1, "J", -0.5, 0.002)  # clock skew: a negative latency counts as 0
    assert tally.pending == 11
    tally.flush()
    assert tally.pending == 0
    tally.flush()  # nothing new: no-op
    now[0] = 1002.5
    fams = parse(reader.text())
    published = "pricing_ha_prices_published_total"
    assert value(fams, published, group="p1", partition="0") == 5
    assert value(fams, published, group="p1", partition="1") == 6
    assert value(fams, "pricing_ha_price_latency_seconds_count", stage="publish") == 4
    assert value(fams, "pricing_ha_price_hop_latency_seconds_count", stage="publish") == 1
    stale = "pricing_ha_instrument_staleness_seconds"
    assert {lab["instrument"] for _, lab, _ in fams[stale].samples} == {"I0", "I1", "J"}
    assert value(fams, stale, instrument="J") == 2.5
    by_partition = "pricing_ha_partition_staleness_seconds"
    assert value(fams, by_partition, partition="1") == 2.5
    tally.forget_partition(1)  # the partition moved away: I1 and J are not reported any more
    fams = parse(reader.text())
    assert {lab["instrument"] for _, lab, _ in fams[stale].samples} == {"I0"}
    assert {lab["partition"] for _, lab, _ in fams[by_partition].samples} == {"0"}
    with pytest.raises(ValueError, match="max_latency_samples"):
        PriceTally(metrics, metrics.gaps, stage="x", max_latency_samples=0)
    provider.shutdown()


def test_default_metrics_have_no_per_instrument_series_or_state() -> None:
    """By default a flood of instrument names adds no series and no per-instrument state."""
    reader = PrometheusExposition()
    provider = MeterProvider(metric_readers=[reader.reader])
    metrics = PricingMetrics(provider.get_meter("t"), clock=lambda: 1000.0)
    tally = PriceTally(metrics, metrics.prices_relayed, stage="relay", clock=lambda: 1000.0)
    for i in range(5000):
        tally.add(i % 3, f"FLOOD{i}", 0.001, None)
    tally.flush()
    text = reader.text()
    provider.shutdown()
    assert "FLOOD" not in text
    assert "instrument=" not in text
    fams = parse(text)
    series = fams["pricing_ha_partition_staleness_seconds"].samples
    assert {lab["partition"] for _, lab, _ in series} == {"0", "1", "2"}
    assert not metrics._fresh
    assert not tally._by_partition


def test_noop_telemetry_never_samples_and_with_az_overrides_the_zone() -> None:
    """Telemetry.noop() is inert; --az replaces telemetry.az and refuses an empty zone."""
    noop = Telemetry.noop("az-z")
    assert not noop.price_path().sample_root()
    assert noop.prometheus_text() == ""
    assert noop.az == "az-z"
    cfg = with_az(AppConfig(), "eu-west-1b")
    assert cfg.telemetry.az == "eu-west-1b"
    assert with_az(cfg, None) is cfg
    with pytest.raises(ConfigError, match="--az"):
        with_az(cfg, " ")


def test_the_caller_mark_applies_to_roots_only() -> None:
    """With ratio 0, PricePath roots are kept; SDK roots and unsampled parents' children not."""
    t = _Traced(0.0)
    path = PricePath(t.tracer, 1.0)
    parent = trace.NonRecordingSpan(
        trace.SpanContext(1, 2, is_remote=True, trace_flags=trace.TraceFlags(0))
    )
    assert path.start_send("x", None, key="k").is_recording()
    assert not path.start_send("x", Context(), key="k").is_recording()
    unsampled = trace.set_span_in_context(parent, Context())
    assert not path.start_send("x", unsampled, key="k").is_recording()
    t.provider.shutdown()
