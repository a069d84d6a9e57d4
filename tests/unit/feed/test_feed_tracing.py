"""The feed starts price-path traces: a sampled quote gets a send span and a traceparent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from pricing_ha.telemetry import PricePathSampler
from pricing_ha.telemetry.pricepath import PricePath, sampled_context
from tests.unit.feed.test_feed_producer import CFG, run


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A provider with the application's sampler (roots at 1 %) keeping spans in memory."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=PricePathSampler(0.01))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()


def _span_id(span: ReadableSpan) -> int:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.span_id


def test_sampled_quotes_carry_the_traceparent_of_their_send_span(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Every other quote drawn: those have a header naming their ended send span; others none."""
    provider, memory = exporter
    draws = iter([0.0, 0.9] * 10)
    path = PricePath(provider.get_tracer("t"), 0.5, rng=lambda: next(draws))
    _, producer = run(rate_hz=0, count=20, price_path=path)
    spans = {_span_id(s): s for s in memory.get_finished_spans()}
    assert len(spans) == 10  # ended when delivered
    traced = [call for call in producer.sent if "headers" in call]
    assert len(traced) == 10
    assert traced == producer.sent[::2]
    for call in traced:
        (header,) = call["headers"]
        ctx = sampled_context(call["headers"])
        assert ctx is not None
        assert header[0] == "traceparent"
        span_id = int(header[1].decode().split("-")[2], 16)
        span = spans[span_id]
        assert span.name == f"send {CFG.topics.quotes}"
        assert span.kind is SpanKind.PRODUCER
        assert span.parent is None
        assert span.attributes is not None
        assert span.attributes["messaging.kafka.message.key"] == call["key"]
        assert span.attributes["messaging.destination.name"] == CFG.topics.quotes


def test_without_sampling_quotes_are_sent_exactly_as_before(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Ratio 0 (or no price path): no span, no headers argument at all."""
    provider, memory = exporter
    _, producer = run(rate_hz=0, count=10, price_path=PricePath(provider.get_tracer("t"), 0.0))
    _, plain = run(rate_hz=0, count=10)
    assert memory.get_finished_spans() == ()
    assert all("headers" not in call for call in producer.sent + plain.sent)


def test_a_failed_delivery_marks_the_send_span_as_an_error(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The span of a quote the broker did not take ends with an ERROR status."""
    provider, memory = exporter
    path = PricePath(provider.get_tracer("t"), 1.0)
    summary, _ = run({"fail_seq": 1}, rate_hz=0, count=4, price_path=path)
    assert not summary.ok
    failed = [s for s in memory.get_finished_spans() if s.status.status_code is StatusCode.ERROR]
    assert failed
    assert all(s.attributes is not None and s.attributes["pricing_ha.seq"] == 1 for s in failed)
