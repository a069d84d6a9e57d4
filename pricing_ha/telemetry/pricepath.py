"""Price-path tracing: ``send {topic}`` / ``process {topic}`` spans with W3C context in headers.

A price's trace follows it through every hop, with the messaging semantic conventions::

    feed       send md.quotes        (PRODUCER, root)
    publisher  process md.quotes     (CONSUMER, child of the feed's send)
                 send prices.raw     (PRODUCER)
    relay      process prices.raw    (CONSUMER, one per copy: p1's and p2's)
                 send prices         (PRODUCER, child of the winning copy's process)
    subscriber process prices        (CONSUMER)

Each ``send`` injects its context into the record's headers as ``traceparent``; the next hop
extracts it. Heartbeats never carry one.

Sampling is decided once per price, where the price enters the system: the feed draws
``price_sample_ratio`` (:meth:`PricePath.sample_root`) and creates no span at all for the other
quotes. Downstream, a hop traces a record only if its ``traceparent`` says *sampled*
(:func:`sampled_context`); a record without one costs a header scan and nothing else. No span
object is created on the unsampled path.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context, create_key, set_value
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from pricing_ha.kafka.headers import HeaderValue

__all__ = [
    "CALLER_SAMPLED_KEY",
    "TRACEPARENT",
    "PricePath",
    "child_context",
    "end_on_delivery",
    "sampled_context",
    "sampled_parent",
    "traceparent_context",
    "traceparent_of",
    "with_traceparent",
]

#: The W3C trace-context header, carried by sampled price records.
TRACEPARENT = "traceparent"
#: Context key marking a root price-path span whose sampling the caller already decided at the
#: ratio (:class:`~pricing_ha.telemetry.sdk.PricePathSampler` then records it, rather than
#: drawing the ratio a second time).
CALLER_SAMPLED_KEY = create_key("pricing_ha.price_path.caller_sampled")

_PROPAGATOR = TraceContextTextMapPropagator()
_SAMPLED_FLAGS = frozenset("13579bdf")  # last hex digit of trace-flags with bit 0 (sampled) set


def _find_traceparent(headers: Iterable[tuple[str, HeaderValue]]) -> HeaderValue:
    for key, value in headers:
        if key == TRACEPARENT:
            return value
    return None


def sampled_context(
    headers: Iterable[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None,
) -> Context | None:
    """The context of a sampled record's ``traceparent`` header, else ``None`` (cheaply).

    Args:
        headers: the record's headers as confluent-kafka returns them (``None`` if none).

    Returns:
        A context whose current span is the remote sender, or ``None`` when the record has no
        ``traceparent``, an unsampled one or a malformed one.
    """
    if not headers:
        return None
    # A list (confluent-kafka's form) needs no ABC check, which costs more than the scan.
    pairs = (
        headers if type(headers) is list or not isinstance(headers, Mapping) else headers.items()
    )
    return sampled_parent(_find_traceparent(pairs))


def sampled_parent(traceparent: HeaderValue) -> Context | None:
    """:func:`sampled_context` of a record whose ``traceparent`` header value the caller has
    already found (``None``: the record has none)."""
    if not traceparent:
        return None
    if isinstance(traceparent, bytes):
        return traceparent_context(traceparent.decode("ascii", "replace"))
    return traceparent_context(traceparent)


def traceparent_context(value: str) -> Context | None:
    """The context a ``traceparent`` header value names, if it is valid and sampled."""
    if value[-1:] not in _SAMPLED_FLAGS:
        return None
    ctx = _PROPAGATOR.extract({TRACEPARENT: value}, context=Context())
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def traceparent_of(span: Span) -> bytes:
    """The W3C ``traceparent`` header value naming ``span``."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}".encode()


def with_traceparent(
    headers: Iterable[tuple[str, HeaderValue]], value: bytes
) -> list[tuple[str, HeaderValue]]:
    """``headers`` with any ``traceparent`` (and ``tracestate``) replaced by ``value``."""
    kept = [(k, v) for k, v in headers if k not in (TRACEPARENT, "tracestate")]
    kept.append((TRACEPARENT, value))
    return kept


def end_on_delivery(
    span: Span, then: Callable[[Any, Any], None] | None = None
) -> Callable[[Any, Any], None]:
    """A confluent-kafka delivery callback that completes a ``send`` span, then calls ``then``.

    The span gets the record's partition and offset, or an error status; it ends when the
    broker has acknowledged the record (or the delivery failed).
    """

    def delivered(err: Any, msg: Any) -> None:
        try:
            if err is not None:
                span.set_status(Status(StatusCode.ERROR, str(err)))
                span.set_attribute("error.type", type(err).__name__)
            elif msg is not None:
                partition, offset = msg.partition(), msg.offset()
                if partition is not None:
                    span.set_attribute("messaging.destination.partition.id", str(partition))
                if offset is not None:
                    span.set_attribute("messaging.kafka.offset", offset)
            span.end()
        finally:
            if then is not None:
                then(err, msg)

    return delivered


class PricePath:
    """Starts the price path's spans (see the module docstring).

    Args:
        tracer: where spans go (a no-op tracer disables them).
        ratio: the price sampling ratio, for :meth:`sample_root`.
        rng: uniform random numbers in [0, 1), injectable for tests.
    """

    def __init__(
        self, tracer: trace.Tracer, ratio: float, *, rng: Callable[[], float] = random.random
    ) -> None:
        """Trace with ``tracer``; sample roots at ``ratio``."""
        self.tracer = tracer
        self.ratio = ratio
        self._rng = rng
        self._root = set_value(CALLER_SAMPLED_KEY, True, Context())

    def sample_root(self) -> bool:
        """Draw whether a price entering the system here is traced (probability ``ratio``)."""
        return self.ratio > 0 and (self.ratio >= 1 or self._rng() < self.ratio)

    def start_send(
        self,
        topic: str,
        parent: Context | None,
        *,
        key: str,
        partition: int | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> Span:
        """A ``send {topic}`` PRODUCER span.

        Args:
            topic: the destination topic.
            parent: the span's parent context; ``None`` starts a new trace (call only after
                :meth:`sample_root` said yes).
            key: the record's key (the instrument).
            partition: the destination partition, when chosen by the caller (else it is set
                on delivery by :func:`end_on_delivery`).
            attributes: extra attributes.
        """
        attrs: dict[str, AttributeValue] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": topic,
            "messaging.kafka.message.key": key,
        }
        if partition is not None:
            attrs["messaging.destination.partition.id"] = str(partition)
        if attributes:
            attrs.update(attributes)
        return self.tracer.start_span(
            f"send {topic}",
            context=self._root if parent is None else parent,
            kind=SpanKind.PRODUCER,
            attributes=attrs,
        )

    def start_process(
        self,
        topic: str,
        parent: Context,
        *,
        partition: int,
        offset: int,
        key: str,
        consumer_group: str,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> Span:
        """A ``process {topic}`` CONSUMER span, child of the sender's context ``parent``."""
        attrs: dict[str, AttributeValue] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": topic,
            "messaging.destination.partition.id": str(partition),
            "messaging.consumer.group.name": consumer_group,
            "messaging.kafka.offset": offset,
            "messaging.kafka.message.key": key,
        }
        if attributes:
            attrs.update(attributes)
        return self.tracer.start_span(
            f"process {topic}", context=parent, kind=SpanKind.CONSUMER, attributes=attrs
        )


def child_context(span: Span) -> Context:
    """A fresh context whose current span is ``span`` (the parent of the next hop's span)."""
    return trace.set_span_in_context(span, Context())
