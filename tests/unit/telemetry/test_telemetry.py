"""pricing_ha.telemetry: SDK set-up, the JSON-lines exporter, sampling, metrics and /metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import SpanKind

import pricing_ha
from neli import Neli
from neli.testing import FakeNeli
from pricing_ha.config import AppConfig, TelemetryConfig
from pricing_ha.errors import ConfigError
from pricing_ha.telemetry import (
    JsonLinesSpanExporter,
    PricePathSampler,
    PricingMetrics,
    PrometheusExposition,
    Telemetry,
    load_spans,
    setup_telemetry,
)
from tests.unit.telemetry.prometheus_format import parse, value


def _cfg(tmp_path: Path, **telemetry: object) -> AppConfig:
    fields = {"az": "eu-west-1a", "traces_dir": tmp_path / "traces", **telemetry}
    return AppConfig(telemetry=TelemetryConfig(**fields))  # type: ignore[arg-type]


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    """File-exporting telemetry of a publisher member p1/m1 in eu-west-1a."""
    tel = setup_telemetry(_cfg(tmp_path), service_role="publisher", group="p1", member="m1", env={})
    yield tel
    tel.shutdown()


def test_resource_names_the_service_instance_and_zone(telemetry: Telemetry) -> None:
    """The resource carries service.name, version, instance id (role/group/az/member) and AZ."""
    assert telemetry.resource["service.name"] == "pricing-ha"
    assert telemetry.resource["service.version"] == pricing_ha.__version__
    assert telemetry.resource["service.instance.id"] == "publisher/p1/eu-west-1a/m1"
    assert telemetry.resource["cloud.availability_zone"] == "eu-west-1a"
    assert telemetry.enabled


def test_without_an_endpoint_spans_go_to_one_jsonl_file_per_process(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    """With no OTLP endpoint, spans land in traces_dir/{role}-{group}-{member}-{pid}.jsonl."""
    path = telemetry.trace_file
    assert path is not None
    assert path.parent == tmp_path / "traces"
    assert path.name.startswith("publisher-p1-m1-")
    assert path.suffix == ".jsonl"
    with telemetry.tracer().start_as_current_span("relay.switch", attributes={"a": "b"}) as span:
        span.add_event("gap", {"seq": 7})
    telemetry.shutdown()
    (record,) = load_spans(path)
    assert record["name"] == "relay.switch"
    assert record["attributes"] == {"a": "b"}
    assert record["events"][0]["name"] == "gap"
    assert record["events"][0]["attributes"] == {"seq": 7}
    assert record["resource"]["service.instance.id"] == "publisher/p1/eu-west-1a/m1"
    assert len(record["trace_id"]) == 32
    assert len(record["span_id"]) == 16
    assert record["parent"] is None
    assert record["end_ns"] >= record["start_ns"] > 0
    assert record["status"]["code"] == "UNSET"


def test_an_explicit_trace_file_wins_over_an_endpoint(tmp_path: Path) -> None:
    """trace_file= sends spans to exactly that file even when OTLP is configured."""
    target = tmp_path / "a" / "probe.jsonl"
    tel = setup_telemetry(
        _cfg(tmp_path),
        service_role="probe",
        group="g",
        member="a",
        trace_file=target,
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
    )
    tel.tracer().start_span("x").end()
    tel.shutdown()
    assert tel.destination == f"file {target}"
    assert [s["name"] for s in load_spans(target)] == ["x"]


async def test_otel_sdk_disabled_makes_everything_a_no_op(tmp_path: Path) -> None:
    """OTEL_SDK_DISABLED=true: no file, no spans, empty /metrics, and every call still works."""
    tel = setup_telemetry(
        _cfg(tmp_path),
        service_role="publisher",
        group="p1",
        member="m1",
        env={"OTEL_SDK_DISABLED": "TRUE"},
    )
    fake = FakeNeli(partitions=1)
    tracing = tel.observe_neli(cast(Neli, fake))  # the fake stands in for Neli
    await fake.acquire(0)
    tel.metrics.prices_published.add(1, {"group": "p1", "partition": "0"})
    assert tel.destination == "disabled"
    assert not tel.enabled
    assert tracing.heartbeat_meta() == {}
    assert tel.prometheus_text() == ""
    assert not (tmp_path / "traces").exists()
    tel.shutdown()


def test_observe_neli_exports_refused_heartbeats_per_reason(telemetry: Telemetry) -> None:
    """The member's refused NELI records appear on /metrics by group and reason."""
    fake = FakeNeli(partitions=2, group_id="pricing.p1", member_name="p1/m1")
    telemetry.observe_neli(cast(Neli, fake))  # the fake stands in for Neli
    fake.rejected = {"not json": 3, "future s": 1}
    fams = parse(telemetry.prometheus_text())
    name = "pricing_ha_neli_heartbeats_rejected_total"
    assert value(fams, name, group="pricing.p1", reason="not json") == 3
    assert value(fams, name, group="pricing.p1", reason="future s") == 1


async def test_observe_neli_traces_with_the_zone_and_feeds_leadership_metrics(
    telemetry: Telemetry,
) -> None:
    """observe_neli: spans carry cloud.availability_zone; held gauge and transition counter move."""
    fake = FakeNeli(partitions=2, group_id="pricing.p1", member_name="p1/m1")
    tracing = telemetry.observe_neli(cast(Neli, fake))  # the fake stands in for Neli
    await fake.acquire(0, 1)
    await fake.revoke(1)
    assert set(tracing.heartbeat_meta()) == {"term.0"}
    fams = parse(telemetry.prometheus_text())
    held = {"group": "pricing.p1", "member": "p1/m1"}
    assert value(fams, "pricing_ha_leadership_held", partition="0", **held) == 1
    assert value(fams, "pricing_ha_leadership_held", partition="1", **held) == 0
    transitions = "pricing_ha_leadership_transitions_total"
    assert value(fams, transitions, partition="1", kind="acquired") == 1
    assert value(fams, transitions, partition="1", kind="revoked") == 1
    telemetry.shutdown()
    assert telemetry.trace_file is not None
    spans = load_spans(telemetry.trace_file)
    acquired = [s for s in spans if s["name"] == "neli.acquired"]
    assert len(acquired) == 2
    assert {s["attributes"]["cloud.availability_zone"] for s in acquired} == {"eu-west-1a"}


def test_price_path_sampler_samples_producer_roots_at_the_ratio_and_the_rest_always() -> None:
    """Ratio 0 drops root send/process spans but keeps internal roots and sampled children."""
    never = PricePathSampler(0.0)
    always = PricePathSampler(1.0)
    tid = 0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0
    for kind in (SpanKind.PRODUCER, SpanKind.CONSUMER):
        assert never.should_sample(None, tid, "send prices.raw", kind).decision is Decision.DROP
        assert always.should_sample(None, tid, "send prices.raw", kind).decision.is_sampled()
    internal = never.should_sample(None, tid, "neli.acquired", SpanKind.INTERNAL)
    assert internal.decision.is_sampled()
    parent = trace.NonRecordingSpan(
        trace.SpanContext(tid, 42, is_remote=True, trace_flags=trace.TraceFlags(1))
    )
    ctx = trace.set_span_in_context(parent, Context())
    child = never.should_sample(ctx, tid, "process prices.raw", SpanKind.CONSUMER)
    assert child.decision.is_sampled()  # the publisher sampled it: follow the headers
    assert "ratio=0.0" in never.get_description()


def test_price_sample_ratio_is_validated() -> None:
    """price_sample_ratio outside 0..1 is a config error naming the key."""
    with pytest.raises(ConfigError, match="price_sample_ratio"):
        TelemetryConfig(price_sample_ratio=1.5)
    assert TelemetryConfig().price_sample_ratio == 0.01


def test_jsonl_exporter_writes_links_and_parents(tmp_path: Path) -> None:
    """Child spans name their parent; links keep the linked trace and span ids."""
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
    tracer = provider.get_tracer("t")
    other = trace.SpanContext(0xAB, 0xCD, is_remote=True, trace_flags=trace.TraceFlags(1))
    with tracer.start_as_current_span("parent") as parent:
        tracer.start_span("child", links=[trace.Link(other, {"why": "pred"})]).end()
    provider.shutdown()
    child, par = load_spans(path)
    assert child["parent"] == f"{parent.get_span_context().span_id:016x}"
    assert child["trace_id"] == par["trace_id"]
    assert child["links"] == [
        {"trace_id": f"{0xAB:032x}", "span_id": f"{0xCD:016x}", "attributes": {"why": "pred"}}
    ]


def test_jsonl_exporter_refuses_after_shutdown_and_reader_skips_torn_lines(
    tmp_path: Path,
) -> None:
    """After shutdown, export fails; load_spans ignores a half-written last line."""
    path = tmp_path / "s.jsonl"
    exporter = JsonLinesSpanExporter(path)
    exporter.shutdown()
    assert exporter.export([]).name == "FAILURE"
    path.write_bytes(orjson.dumps({"name": "ok"}) + b"\n" + b'{"name": "to')
    assert load_spans(path) == [{"name": "ok"}]


def test_every_instrument_renders_as_valid_prometheus() -> None:
    """Counters become _total, gauges and the latency histogram render with valid syntax."""
    now = [1000.0]
    r = PrometheusExposition()
    provider = MeterProvider(metric_readers=[r.reader])
    m = PricingMetrics(provider.get_meter("t"), clock=lambda: now[0], per_instrument=True)
    m.prices_published.add(3, {"group": "p1", "partition": "0"})
    m.prices_relayed.add(2, {"partition": "0"})
    m.prices_delivered.add(1, {"partition": "0"})
    m.duplicates_dropped.add(5, {"stage": "relay", "partition": "0"})
    m.gaps.add(1, {"stage": "subscriber", "partition": "0"})
    for seconds in (0.0004, 0.003, 0.003, 20.0):
        m.latency.record(seconds, {"stage": "subscriber"})
    m.mark_fresh("EURUSD", 997.5)
    m.mark_fresh("EURUSD", 990.0)  # older news never makes it look fresher
    m.mark_fresh("USDJPY")
    m.forget_instrument("USDJPY")
    m.set_leadership("pricing.p2", "p2/m1", 3, True)
    text = r.text()
    provider.shutdown()
    fams = parse(text)
    assert fams["pricing_ha_prices_published_total"].kind == "counter"
    assert value(fams, "pricing_ha_prices_published_total", group="p1") == 3
    assert value(fams, "pricing_ha_prices_relayed_total") == 2
    assert value(fams, "pricing_ha_prices_delivered_total") == 1
    assert value(fams, "pricing_ha_duplicates_dropped_total", stage="relay") == 5
    assert value(fams, "pricing_ha_seq_gaps_total", stage="subscriber") == 1
    assert value(fams, "pricing_ha_instrument_staleness_seconds", instrument="EURUSD") == 2.5
    assert not [
        s for s in fams["pricing_ha_instrument_staleness_seconds"].samples if "USDJPY" in str(s)
    ]
    assert value(fams, "pricing_ha_leadership_held", partition="3") == 1
    hist = fams["pricing_ha_price_latency_seconds"]
    assert hist.kind == "histogram"
    buckets = [(lab["le"], v) for n, lab, v in hist.samples if n.endswith("_bucket")]
    assert buckets[0] == ("0.0005", 1)
    assert dict(buckets)["0.005"] == 3
    assert buckets[-1] == ("+Inf", 4)
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    assert value(fams, "pricing_ha_price_latency_seconds_count") == 4
    assert value(fams, "pricing_ha_price_latency_seconds_sum") == pytest.approx(20.0064)


def test_label_values_and_help_are_escaped() -> None:
    """Quotes, backslashes and newlines in label values survive the round trip."""
    r = PrometheusExposition()
    provider = MeterProvider(metric_readers=[r.reader])
    counter = provider.get_meter("t").create_counter("odd.name-x", description='a "b"\nc')
    counter.add(1, {"weird key": 'q"u\\o\nte'})
    text = r.text()
    provider.shutdown()
    fams = parse(text)
    assert value(fams, "odd_name_x_total", weird_key='q"u\\o\nte') == 1


def test_otel_service_name_and_resource_attributes_win_over_the_apps_defaults(
    tmp_path: Path,
) -> None:
    """OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (which wins for service.name) override."""
    env = {
        "OTEL_SERVICE_NAME": "prices-eu",
        "OTEL_RESOURCE_ATTRIBUTES": (
            "service.name=ignored,deployment.environment.name=prod,"
            "cloud.availability_zone=euw1-az3,team=fx%20desk"
        ),
    }
    tel = setup_telemetry(_cfg(tmp_path), service_role="relay", group=None, member="r1", env=env)
    try:
        assert tel.resource["service.name"] == "prices-eu"
        assert tel.resource["deployment.environment.name"] == "prod"
        assert tel.resource["cloud.availability_zone"] == "euw1-az3"
        assert tel.resource["team"] == "fx desk"
        assert tel.resource["service.instance.id"] == "relay/eu-west-1a/r1"  # default kept
        with tel.tracer().start_as_current_span("x"):
            pass
        tel.shutdown()
        assert tel.trace_file is not None
        (record,) = load_spans(tel.trace_file)
        assert record["resource"]["service.name"] == "prices-eu"
        assert record["resource"]["deployment.environment.name"] == "prod"
    finally:
        tel.shutdown()


@pytest.mark.parametrize(
    "variable",
    [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    ],
)
def test_an_otlp_protocol_without_its_exporter_is_a_clear_start_up_error(
    tmp_path: Path, variable: str
) -> None:
    """OTEL_EXPORTER_OTLP_*PROTOCOL=grpc (exporter not installed) fails naming the variable."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", variable: "grpc"}
    with pytest.raises(ConfigError, match=f"{variable}.*grpc.*http/protobuf"):
        setup_telemetry(_cfg(tmp_path), service_role="relay", group=None, member="r1", env=env)


def test_http_protobuf_is_the_accepted_otlp_protocol(tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf is what the exporter speaks: accepted."""
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    tel = setup_telemetry(_cfg(tmp_path), service_role="relay", group=None, member="r1", env=env)
    tel.shutdown()
    assert tel.destination == "otlp http://127.0.0.1:9/v1/traces"


def test_metrics_carry_the_resource_as_target_info_and_processes_do_not_share_series(
    tmp_path: Path,
) -> None:
    """/metrics has target_info with the resource; two telemetries keep separate registries."""
    a = setup_telemetry(_cfg(tmp_path), service_role="relay", group=None, member="a", env={})
    b = setup_telemetry(_cfg(tmp_path), service_role="relay", group=None, member="b", env={})
    try:
        a.metrics.prices_relayed.add(2, {"partition": "0"})
        b.metrics.prices_relayed.add(1, {"partition": "1"})
        fams_a, fams_b = parse(a.prometheus_text()), parse(b.prometheus_text())
        assert value(fams_a, "target_info", service_instance_id="relay/eu-west-1a/a") == 1
        assert value(fams_a, "target_info", service_name="pricing-ha") == 1
        assert value(fams_a, "pricing_ha_prices_relayed_total", partition="0") == 2
        assert value(fams_b, "pricing_ha_prices_relayed_total") == 1
        assert value(fams_b, "target_info", service_instance_id="relay/eu-west-1a/b") == 1
    finally:
        a.shutdown()
        b.shutdown()


def test_relay_takeovers_and_suspicions_are_counted_from_zero(telemetry: Telemetry) -> None:
    """A watched relay's takeovers and suspicions are on /metrics at 0, then as counted."""
    counts = [0, 0]
    telemetry.metrics.watch_takeovers(lambda: (counts[0], counts[1]))
    fams = parse(telemetry.prometheus_text())
    assert value(fams, "pricing_ha_relay_takeovers_total") == 0
    assert value(fams, "pricing_ha_relay_suspicions_total") == 0
    counts[:] = [3, 1]
    fams = parse(telemetry.prometheus_text())
    assert fams["pricing_ha_relay_takeovers_total"].kind == "counter"
    assert value(fams, "pricing_ha_relay_takeovers_total") == 3
    assert value(fams, "pricing_ha_relay_suspicions_total") == 1
