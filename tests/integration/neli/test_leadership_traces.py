"""Leadership traces across processes: a fail-over after SIGKILL links the new leader's spans to
the dead leader's terms, through the trace contexts carried in NELI heartbeats."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from neli import Neli, NeliConfig, trace_leadership
from neli.wire import Heartbeat, HeartbeatDecodeError
from pricing_ha.local.waiting import wait_for, wait_for_async
from pricing_ha.telemetry import load_spans
from tests.integration.neli_harness import SESSION_MS, Cluster

S = SESSION_MS / 1000
M = 4
SETTLE_TIMEOUT = 6 * S + 20  # join, rebalance, hand-over (T) on a loaded 2-core machine
POLL_S = 0.1  # without blocking the event loop for long: the in-process member runs on it


def _spans_of(path: Path) -> list[dict[str, Any]]:
    return load_spans(path) if path.exists() else []


def _led_per_file(spans: list[dict[str, Any]]) -> set[int]:
    """Partitions whose latest transition in a member's span file is a gain."""
    last: dict[int, str] = {}
    for span in sorted(spans, key=lambda s: s["start_ns"]):
        name = span["name"]
        if name in ("neli.acquired", "neli.resumed", "neli.fenced", "neli.revoked"):
            last[span["attributes"]["neli.partition"]] = name
    return {p for p, name in last.items() if name in ("neli.acquired", "neli.resumed")}


def _b_spans(exporter: InMemorySpanExporter, name: str, partition: int) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name == name
        and s.attributes is not None
        and s.attributes["neli.partition"] == partition
    ]


async def test_failover_after_sigkill_links_the_new_leader_to_the_dead_leaders_terms(
    neli_cluster: Callable[..., Cluster],
    bootstrap: str,
    topic_factory: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """B's ACQUIRED spans for A's partitions link to A's term spans after A is SIGKILLed."""
    topic = topic_factory(M)
    group = unique_name("g")
    a_file = tmp_path / "a-spans.jsonl"
    a = neli_cluster(topic).start(
        "a", group, trace_file=a_file, az="az-a", env={"OTEL_SDK_DISABLED": "false"}
    )
    await wait_for_async(
        lambda: _led_per_file(_spans_of(a_file)) == set(range(M)),
        SETTLE_TIMEOUT,
        lambda: f"A to trace leading every partition\n{a.log_tail()}",
        interval_s=POLL_S,
    )

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    b = Neli(
        NeliConfig(
            bootstrap_servers=bootstrap,
            group_id=group,
            topic=topic,
            session_timeout_ms=SESSION_MS,
            member_name="b",
        )
    )
    trace_leadership(b, tracer_provider=provider, attributes={"cloud.availability_zone": "az-b"})
    await b.start()
    try:
        # Settled: A and B lead disjoint, non-empty shares of the partitions.
        def settled() -> bool:
            a_led, b_led = _led_per_file(_spans_of(a_file)), set(b.led_partitions())
            return bool(a_led and b_led) and a_led | b_led == set(range(M)) and not a_led & b_led

        await wait_for_async(
            settled,
            SETTLE_TIMEOUT,
            lambda: (
                f"A and B to share the partitions: A {_led_per_file(_spans_of(a_file))}, "
                f"B {sorted(b.led_partitions())}\n{a.log_tail()}"
            ),
            interval_s=POLL_S,
        )
        victim_parts = _led_per_file(_spans_of(a_file))
        a_spans = _spans_of(a_file)
        a.kill()
        a.wait(timeout=10)
        await wait_for_async(
            lambda: set(b.led_partitions()) == set(range(M)),
            S + SETTLE_TIMEOUT,
            lambda: f"B to take over {sorted(victim_parts)}; B leads {sorted(b.led_partitions())}",
            interval_s=POLL_S,
        )
    finally:
        await b.close()
        provider.shutdown()

    # A's open term on p: the parent of its latest ACQUIRED/RESUMED span (never ended: killed).
    a_terms: dict[int, tuple[str, str]] = {}
    for span in sorted(a_spans, key=lambda s: s["start_ns"]):
        if span["name"] in ("neli.acquired", "neli.resumed"):
            a_terms[span["attributes"]["neli.partition"]] = (span["trace_id"], span["parent"])
    finished_a_terms = {s["name"] for s in _spans_of(a_file) if s["name"].startswith("neli.term")}
    assert victim_parts
    for p in sorted(victim_parts):
        assert f"neli.term p{p}" not in finished_a_terms  # open when A died
        acquired = _b_spans(exporter, "neli.acquired", p)
        assert acquired, f"B has no neli.acquired span for partition {p}"
        takeover = acquired[-1]
        links = [
            (f"{lk.context.trace_id:032x}", f"{lk.context.span_id:016x}") for lk in takeover.links
        ]
        assert links == [a_terms[p]], f"partition {p}"
        attrs = dict(takeover.attributes or {})
        assert attrs["neli.group"] == group
        assert attrs["neli.member.id"] == b.member_id
        assert attrs["neli.member.name"] == "b"
        assert attrs["neli.partition"] == p
        assert attrs["neli.mode"] == "non-exclusive"
        assert attrs["neli.variant"] == "full"
        assert attrs["neli.reason"] == "assigned"
        assert attrs["cloud.availability_zone"] == "az-b"
        assert attrs["neli.predecessor.member.name"] == "a"
        (term,) = [
            t
            for t in _b_spans(exporter, f"neli.term p{p}", p)
            if t.start_time == takeover.start_time
        ]
        assert [(f"{lk.context.span_id:016x}") for lk in term.links] == [a_terms[p][1]]
    # Every partition B led was revoked when it closed, and each revoke ended a term.
    for p in range(M):
        assert _b_spans(exporter, "neli.revoked", p), f"no neli.revoked for {p}"
        assert _b_spans(exporter, f"neli.term p{p}", p)
    # A's own spans carry its zone and the resource that names the process.
    assert {s["attributes"]["cloud.availability_zone"] for s in a_spans} == {"az-a"}
    assert {s["resource"]["service.instance.id"] for s in a_spans} == {f"probe/{group}/az-a/a"}


async def test_heartbeat_meta_providers_are_merged(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """Meta from the constructor and from add_heartbeat_meta travel together in heartbeats."""
    topic = topic_factory(1)
    member = Neli(
        NeliConfig(
            bootstrap_servers=bootstrap,
            group_id=unique_name("g"),
            topic=topic,
            session_timeout_ms=SESSION_MS,
        ),
        heartbeat_meta=lambda: {"from": "ctor", "shared": "ctor"},
    )
    member.add_heartbeat_meta(lambda: {"term.0": "tp", "shared": "added"})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("reader"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    metas: list[dict[str, Any]] = []

    def read_one() -> bool:
        msg = consumer.poll(0.2)
        if msg is None or msg.error() is not None:
            return False
        try:
            hb = Heartbeat.decode(msg.value())
        except HeartbeatDecodeError:
            return False
        if hb.member_id == member.member_id:
            metas.append(dict(hb.meta))
        return bool(metas)

    await member.start()
    try:
        await asyncio.to_thread(wait_for, read_one, 20, "a heartbeat of the member", interval_s=0)
    finally:
        consumer.close()
        await member.close(handover=False)
    assert metas, "no heartbeat of the member was read"
    assert metas[0] == {"from": "ctor", "shared": "added", "term.0": "tp"}
