"""Leadership traces: a span per transition, a span per term, linked across fail-overs.

:func:`trace_leadership` registers a barrier handler on a member and records, with the
OpenTelemetry **API** only (the application owns the SDK, its exporters and sampling):

* a short span per event, named ``neli.acquired``, ``neli.revoked``, ``neli.fenced`` or
  ``neli.resumed``;
* a span per leadership **term**, ``neli.term p{partition}``: it starts at ACQUIRED or RESUMED
  and ends at FENCED or REVOKED. Each term is the root of its own trace, and the event spans of
  the term (the gain that opened it, the loss that closed it) are its children.

Fail-overs are followed across processes through the heartbeats: the member publishes, in every
heartbeat's meta, the W3C ``traceparent`` of each of its open terms under ``term.{partition}``.
The next leader of a partition receives its predecessor's last heartbeat meta with the ACQUIRED
event (:attr:`~neli.LeadershipEvent.predecessor`), and its ACQUIRED span and new term span carry
a :class:`~opentelemetry.trace.Link` to the predecessor's term. A SIGKILLed predecessor never
ends its term span, but the link still names it, and the event spans of that term carry it as
their parent.

Spans are timed with the event's ``at_wall`` (the member's clock): event spans are instants,
terms last from gain to loss. If ``opentelemetry-api`` is not installed every call is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from neli._config import NeliConfig
from neli._events import BarrierHandler, LeadershipEvent

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _OTEL = True
except ImportError:  # pragma: no cover - exercised by a test that hides the package
    _OTEL = False

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

log = logging.getLogger("neli.telemetry")

#: Heartbeat meta key carrying the traceparent of the term on a partition.
TERM_META_PREFIX = "term."
_INSTRUMENTATION = "neli"
_MAX_ROLES = 100  # keep spans small; the count is recorded separately


class _Member(Protocol):
    """What tracing needs from a member: :class:`neli.Neli` or :class:`neli.testing.FakeNeli`."""

    @property
    def member_id(self) -> str:
        """The member's id."""
        ...

    def add_barrier(self, handler: BarrierHandler) -> Callable[[], None]:
        """Register a barrier handler; returns a remover."""
        ...


def term_meta_key(partition: int) -> str:
    """The heartbeat meta key under which a member publishes its term on ``partition``."""
    return f"{TERM_META_PREFIX}{partition}"


class LeadershipTracing:
    """The tracing attached to one member by :func:`trace_leadership`.

    Handlers run on the member's event loop, one event at a time; so does the heartbeat meta
    provider. :meth:`close` detaches it and ends any open term.
    """

    def __init__(
        self,
        tracer: Tracer | None,
        base: Mapping[str, AttributeValue],
        roles: Callable[[int], Iterable[str]] | None,
    ) -> None:
        """Use :func:`trace_leadership`."""
        self._tracer = tracer
        self._base = dict(base)
        self._roles = roles
        self._terms: dict[int, Span] = {}
        self._traceparents: dict[int, str] = {}
        self._last_term: dict[int, SpanContext] = {}
        self._remove: Callable[[], None] | None = None

    @property
    def enabled(self) -> bool:
        """Whether spans are recorded (``opentelemetry-api`` is importable)."""
        return self._tracer is not None

    def heartbeat_meta(self) -> dict[str, str]:
        """``{"term.{p}": traceparent}`` for every open term (published in heartbeats)."""
        return {term_meta_key(p): tp for p, tp in self._traceparents.items()}

    def term_context(self, partition: int) -> SpanContext | None:
        """The span context of the open term on ``partition``, if any."""
        span = self._terms.get(partition)
        return None if span is None else span.get_span_context()

    def handle(self, event: LeadershipEvent) -> None:
        """Record ``event`` (the barrier handler; never raises)."""
        if self._tracer is None:
            return
        try:
            self._record(self._tracer, event)
        except Exception:  # tracing must never break leadership handling
            log.exception("neli: could not trace %s", event)

    def close(self) -> None:
        """Stop tracing; end open terms (as of now) with ``neli.term.end=untraced``."""
        if self._remove is not None:
            self._remove()
            self._remove = None
        for partition in list(self._terms):
            self._end_term(partition, "untraced", "tracing closed", None)

    # -- recording ----------------------------------------------------------------------------

    def _attributes(self, event: LeadershipEvent) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            **self._base,
            "neli.group": event.group,
            "neli.member.id": event.member_id,
            "neli.member.name": event.member_name,
            "neli.partition": event.partition,
            "neli.reason": event.reason,
        }
        if self._roles is not None:
            roles = sorted(self._roles(event.partition))
            attrs["neli.roles"] = roles[:_MAX_ROLES]
            attrs["neli.roles.count"] = len(roles)
        pred = event.predecessor or {}
        if "member_id" in pred:
            attrs["neli.predecessor.member.id"] = pred["member_id"]
        if "member_name" in pred:
            attrs["neli.predecessor.member.name"] = pred["member_name"]
        return attrs

    def _record(self, tracer: Tracer, event: LeadershipEvent) -> None:
        at_ns = int(event.at_wall * 1e9)
        attrs = self._attributes(event)
        name = f"neli.{event.kind.value}"
        p = event.partition
        if event.kind.gains:
            if p in self._terms:  # a gain without a loss: never expected, but keep terms apart
                self._end_term(p, "superseded", event.reason, at_ns)
            links = _predecessor_links(event)
            term = tracer.start_span(
                f"neli.term p{p}",
                context=Context(),
                attributes={**attrs, "neli.term.start": event.kind.value},
                links=links,
                start_time=at_ns,
            )
            self._terms[p] = term
            carrier: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(
                carrier, context=trace.set_span_in_context(term, Context())
            )
            if term.get_span_context().is_valid and "traceparent" in carrier:
                self._traceparents[p] = carrier["traceparent"]
            parent = trace.set_span_in_context(term, Context())
            tracer.start_span(
                name, context=parent, attributes=attrs, links=links, start_time=at_ns
            ).end(end_time=at_ns)
            return
        term_span = self._terms.get(p)
        if term_span is not None:
            ctx = trace.set_span_in_context(term_span, Context())
            tracer.start_span(name, context=ctx, attributes=attrs, start_time=at_ns).end(
                end_time=at_ns
            )
            self._end_term(p, event.kind.value, event.reason, at_ns)
            return
        # A loss outside a term (REVOKED after FENCED): its own trace, linked to the last term.
        last = self._last_term.get(p)
        links = [trace.Link(last, {"neli.link": "previous term"})] if last is not None else []
        tracer.start_span(
            name, context=Context(), attributes=attrs, links=links, start_time=at_ns
        ).end(end_time=at_ns)

    def _end_term(self, partition: int, kind: str, reason: str, at_ns: int | None) -> None:
        term = self._terms.pop(partition)
        self._traceparents.pop(partition, None)
        self._last_term[partition] = term.get_span_context()
        term.set_attributes({"neli.term.end": kind, "neli.term.end_reason": reason})
        term.end(end_time=at_ns)


def _predecessor_links(event: LeadershipEvent) -> list[Any]:
    """A link to the predecessor's term on the event's partition, from its heartbeat meta."""
    traceparent = (event.predecessor or {}).get(term_meta_key(event.partition))
    if not traceparent:
        return []
    ctx = TraceContextTextMapPropagator().extract({"traceparent": traceparent}, context=Context())
    span_context = trace.get_current_span(ctx).get_span_context()
    if not span_context.is_valid:
        log.debug("neli: ignoring malformed predecessor traceparent %r", traceparent)
        return []
    return [trace.Link(span_context, {"neli.link": "predecessor term"})]


def trace_leadership(
    neli: _Member,
    *,
    tracer_provider: TracerProvider | None = None,
    attributes: Mapping[str, str] | None = None,
    roles: Callable[[int], Iterable[str]] | None = None,
) -> LeadershipTracing:
    """Trace every leadership transition of ``neli`` and link fail-overs across processes.

    Call it before :meth:`neli.Neli.start` so that the first ACQUIRED is traced. Register it
    after the application's own barrier handlers if loss spans should come after in-flight work
    has finished (handlers run in registration order).

    Args:
        neli: the member (a :class:`neli.Neli`, or :class:`neli.testing.FakeNeli` in tests). If
            it has ``add_heartbeat_meta`` its heartbeats carry the open terms' trace contexts.
        tracer_provider: where spans go; default the global provider (a no-op until the
            application installs an SDK).
        attributes: added to every span, e.g. ``{"cloud.availability_zone": "eu-west-1a"}``.
        roles: optional ``partition -> roles`` (e.g. the instruments seen on it), recorded as
            ``neli.roles``.

    Returns:
        The tracing; :meth:`LeadershipTracing.close` detaches it.
    """
    if not _OTEL:
        return LeadershipTracing(None, {}, None)
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    tracer = provider.get_tracer(_INSTRUMENTATION)
    base: dict[str, AttributeValue] = dict(attributes or {})
    config = getattr(neli, "config", None)
    if isinstance(config, NeliConfig):
        base["neli.mode"] = config.mode.value
        base["neli.variant"] = config.variant.value
    tracing = LeadershipTracing(tracer, base, roles)
    tracing._remove = neli.add_barrier(tracing.handle)
    add_meta = getattr(neli, "add_heartbeat_meta", None)
    if callable(add_meta):
        add_meta(tracing.heartbeat_meta)
    return tracing
