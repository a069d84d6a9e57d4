"""neli.trace_leadership: spans per transition and per term, linked across a fail-over."""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

import neli
from neli import EventKind, LeadershipEvent, Mode, Neli, NeliConfig, Variant, trace_leadership
from neli.testing import FakeNeli

AZ = {"cloud.availability_zone": "eu-west-1a"}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """An in-memory span exporter (its provider is shut down after the test)."""
    exp = InMemorySpanExporter()
    yield exp
    exp.shutdown()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """A local tracer provider exporting synchronously to ``exporter``."""
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _ctx(span: ReadableSpan) -> SpanContext:
    ctx: SpanContext | None = span.context  # the SDK leaves the property unannotated
    assert ctx is not None
    return ctx


async def test_each_transition_gets_a_span_with_the_required_attributes(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """acquired/fenced/resumed/revoked each produce a span with group, member, partition, reason."""
    fake = FakeNeli(partitions=4, group_id="pricing.p1", member_name="p1/m1")
    trace_leadership(fake, tracer_provider=provider, attributes=AZ)
    await fake.acquire(2)
    await fake.fence(2, reason="heartbeats stale")
    await fake.resume(2)
    await fake.revoke(2, reason="rebalance")
    names = [s.name for s in exporter.get_finished_spans() if not s.name.startswith("neli.term")]
    assert names == ["neli.acquired", "neli.fenced", "neli.resumed", "neli.revoked"]
    fenced = _spans(exporter, "neli.fenced")[0]
    assert fenced.attributes is not None
    assert dict(fenced.attributes) == {
        "cloud.availability_zone": "eu-west-1a",
        "neli.group": "pricing.p1",
        "neli.member.id": fake.member_id,
        "neli.member.name": "p1/m1",
        "neli.partition": 2,
        "neli.reason": "heartbeats stale",
    }


async def test_a_term_spans_from_gain_to_loss_and_parents_its_event_spans(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """ACQUIRED..FENCED and RESUMED..REVOKED are two terms; each is a root with its events."""
    fake = FakeNeli(partitions=2)
    trace_leadership(fake, tracer_provider=provider)
    await fake.acquire(1)
    assert _spans(exporter, "neli.term p1") == []  # still open
    await fake.fence(1)
    await fake.resume(1)
    await fake.revoke(1)
    terms = _spans(exporter, "neli.term p1")
    assert len(terms) == 2
    assert all(t.parent is None for t in terms)
    first, second = terms
    assert first.attributes is not None
    assert second.attributes is not None
    assert (first.attributes["neli.term.start"], first.attributes["neli.term.end"]) == (
        "acquired",
        "fenced",
    )
    assert (second.attributes["neli.term.start"], second.attributes["neli.term.end"]) == (
        "resumed",
        "revoked",
    )
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    for name, term in (
        ("neli.acquired", first),
        ("neli.fenced", first),
        ("neli.resumed", second),
        ("neli.revoked", second),
    ):
        span = by_name[name]
        assert span.parent is not None
        assert span.parent.span_id == _ctx(term).span_id, name
        assert _ctx(span).trace_id == _ctx(term).trace_id, name


async def test_heartbeat_meta_carries_the_open_terms_traceparents(provider: TracerProvider) -> None:
    """Open terms appear in heartbeat meta as W3C traceparents, and disappear when they end."""
    fake = FakeNeli(partitions=3)
    tracing = trace_leadership(fake, tracer_provider=provider)
    assert tracing.enabled
    await fake.acquire(0, 2)
    meta = fake.heartbeat_meta()
    assert set(meta) == {"member_id", "member_name", "term.0", "term.2"}
    ctx = tracing.term_context(2)
    assert ctx is not None
    version, trace_id, span_id, flags = meta["term.2"].split("-")
    assert (version, trace_id, span_id) == ("00", f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")
    assert int(flags, 16) & 1  # sampled
    await fake.fence(0)
    assert "term.0" not in fake.heartbeat_meta()
    assert tracing.term_context(0) is None


async def test_new_leader_links_to_the_predecessors_term(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """After a fail-over, the new leader's ACQUIRED span and term link to the old leader's term."""
    a = FakeNeli(partitions=2, member_name="a")
    b = FakeNeli(partitions=2, member_name="b")
    tracing_a = trace_leadership(a, tracer_provider=provider)
    trace_leadership(b, tracer_provider=provider)
    await a.acquire(0, 1)
    a_term = tracing_a.term_context(1)
    assert a_term is not None
    last_heartbeat = a.heartbeat_meta()  # A dies here; B got this with its last heartbeat
    await b.acquire(1, predecessor=last_heartbeat)
    acquired_b = [
        s
        for s in _spans(exporter, "neli.acquired")
        if s.attributes is not None and s.attributes["neli.member.name"] == "b"
    ]
    assert len(acquired_b) == 1
    assert _terms_of(exporter, "b") == []  # B's term is still open: not exported yet
    for span in acquired_b:
        assert [(lk.context.trace_id, lk.context.span_id) for lk in span.links] == [
            (a_term.trace_id, a_term.span_id)
        ]
        assert span.attributes is not None
        assert span.attributes["neli.predecessor.member.name"] == "a"
    await b.revoke(1)
    (term,) = _terms_of(exporter, "b")
    assert [lk.context.span_id for lk in term.links] == [a_term.span_id]
    assert _ctx(term).trace_id != a_term.trace_id  # a new term is a new trace, linked


def _terms_of(exporter: InMemorySpanExporter, member: str) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name.startswith("neli.term")
        and s.attributes is not None
        and s.attributes["neli.member.name"] == member
    ]


async def test_a_predecessor_without_a_valid_term_gives_no_link(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """A predecessor that published no (or a malformed) traceparent yields no link, no error."""
    fake = FakeNeli(partitions=3)
    trace_leadership(fake, tracer_provider=provider)
    await fake.acquire(0, predecessor={"member_name": "x", "term.0": "not-a-traceparent"})
    await fake.acquire(
        1, predecessor={"member_name": "x", "term.0": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    )
    spans = _spans(exporter, "neli.acquired")
    assert len(spans) == 2
    assert [len(s.links) for s in spans] == [0, 0]


async def test_revoked_after_fenced_is_linked_to_the_term_it_follows(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """REVOKED outside a term (after FENCED) is its own root span, linked to the last term."""
    fake = FakeNeli(partitions=1)
    trace_leadership(fake, tracer_provider=provider)
    await fake.acquire(0)
    await fake.fence(0)
    await fake.revoke(0)
    (term,) = _spans(exporter, "neli.term p0")
    (revoked,) = _spans(exporter, "neli.revoked")
    assert revoked.parent is None
    assert [lk.context.span_id for lk in revoked.links] == [_ctx(term).span_id]


async def test_close_detaches_and_ends_open_terms(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """close() ends open terms as 'untraced' and later events are not recorded."""
    fake = FakeNeli(partitions=2)
    tracing = trace_leadership(fake, tracer_provider=provider)
    await fake.acquire(0)
    tracing.close()
    (term,) = _spans(exporter, "neli.term p0")
    assert term.attributes is not None
    assert term.attributes["neli.term.end"] == "untraced"
    before = len(exporter.get_finished_spans())
    await fake.revoke(0)
    await fake.acquire(1)
    assert len(exporter.get_finished_spans()) == before
    assert "term.1" not in fake.heartbeat_meta()


async def test_roles_are_recorded_when_known(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """A roles callback puts the partition's roles (sorted) and their count on the spans."""
    fake = FakeNeli(partitions=2)
    trace_leadership(
        fake, tracer_provider=provider, roles=lambda p: {"USDJPY", "EURUSD"} if p == 0 else set()
    )
    await fake.acquire(0)
    (span,) = _spans(exporter, "neli.acquired")
    assert span.attributes is not None
    assert tuple(span.attributes["neli.roles"]) == ("EURUSD", "USDJPY")  # type: ignore[arg-type]
    assert span.attributes["neli.roles.count"] == 2


async def test_a_failing_tracer_never_breaks_the_barrier(
    provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """An error while tracing is logged; the event still reaches the member's other handlers."""
    fake = FakeNeli(partitions=1)

    def broken(_p: int) -> list[str]:
        raise RuntimeError("boom")

    seen: list[EventKind] = []
    trace_leadership(fake, tracer_provider=provider, roles=broken)
    fake.add_barrier(lambda e: seen.append(e.kind))
    with caplog.at_level(logging.ERROR, logger="neli.telemetry"):
        await fake.acquire(0)
    assert seen == [EventKind.ACQUIRED]
    assert "could not trace" in caplog.text


def test_mode_and_variant_come_from_a_real_members_config(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """With a real Neli, spans carry neli.mode/neli.variant and heartbeats get the term meta."""
    member = Neli(
        NeliConfig(
            bootstrap_servers="127.0.0.1:1",
            group_id="g",
            topic="t",
            variant=Variant.FAST,
            mode=Mode.EXCLUSIVE,
            session_timeout_ms=3000,
            threshold_ms=2000,
        )
    )
    tracing = trace_leadership(member, tracer_provider=provider)
    tracing.handle(
        LeadershipEvent(
            kind=EventKind.ACQUIRED,
            partition=0,
            group="g",
            member_id=member.member_id,
            member_name="m",
            reason="assigned",
            at_mono=1.0,
            at_wall=1_700_000_000.0,
        )
    )
    (span,) = _spans(exporter, "neli.acquired")
    assert span.attributes is not None
    assert (span.attributes["neli.mode"], span.attributes["neli.variant"]) == ("exclusive", "fast")
    assert span.start_time == 1_700_000_000 * 10**9
    assert set(tracing.heartbeat_meta()) == {"term.0"}


def test_without_opentelemetry_everything_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """If opentelemetry cannot be imported, tracing attaches nothing and records nothing."""
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    path = neli.__file__.replace("__init__.py", "_telemetry.py")
    spec = importlib.util.spec_from_file_location("neli._telemetry_without_otel", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fake = FakeNeli(partitions=1)
    tracing = module.trace_leadership(fake)
    assert tracing.enabled is False
    assert fake._bus._barriers == []
    assert fake.heartbeat_meta() == {"member_id": fake.member_id, "member_name": "fake"}
