"""Operations on a real broker: librdkafka statistics on /metrics, JSON logs, readiness."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from pricing_ha.config import load_config
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.member.health import broker_check, read_health_file
from tests.unit.prometheus_format import Family, parse
from tests.waiting import wait_for


@pytest.fixture
def cluster_env() -> dict[str, str]:
    """Statistics every 0.5 s; metrics on (whatever the caller's environment says)."""
    return {
        "PRICING_HA__TELEMETRY__KAFKA_STATS_INTERVAL_MS": "500",
        "OTEL_SDK_DISABLED": "false",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
    }


def _metrics(url: str) -> dict[str, Family]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        return parse(resp.read().decode())


def test_publisher_exports_consumer_lag_queue_depth_and_broker_rtt(
    cluster: PricingCluster,
) -> None:
    """A publisher leading every partition reports md.quotes lag for each, from librdkafka."""
    health_file = cluster.workdir / "p1-a-health.json"
    p1 = cluster.cli(
        "p1-a", "run", "--group", cluster.group("p1"), "--member", "a",
        "--health-file", str(health_file),
    )  # fmt: skip
    cluster.wait_led(["p1"])
    cluster.feed(instruments=8, rate=20, duration=30)
    url = read_health_file(health_file)
    assert url is not None, p1.log_tail()
    quotes = cluster.topics["quotes"]
    wanted = {str(p) for p in range(cluster.partitions)}
    seen: dict[str, float] = {}

    def lag_reported() -> bool:
        fams = _metrics(url)
        family = fams.get("pricing_ha_kafka_consumer_lag")
        seen.clear()
        for _, labels, lag in family.samples if family else ():
            if labels["topic"] == quotes and labels["client"] == "a-quotes":
                seen[labels["partition"]] = lag
        return set(seen) == wanted and "pricing_ha_kafka_broker_rtt_seconds" in fams

    wait_for(lag_reported, 60, lambda: f"lag of every partition on /metrics (got {seen})")
    assert all(lag >= 0 for lag in seen.values()), seen
    fams = _metrics(url)
    depth = fams["pricing_ha_kafka_producer_queue_depth"].samples
    assert any(labels["client"] == "a-prices" and v >= 0 for _, labels, v in depth), depth
    rtt = fams["pricing_ha_kafka_broker_rtt_seconds"].samples
    assert all(v >= 0 for *_, v in rtt)
    assert {labels["stat"] for _, labels, _ in rtt} == {"avg", "p99"}


def test_publisher_with_json_logs_writes_only_json_lines(cluster: PricingCluster) -> None:
    """`run --json-logs` on the real broker: every log line is a JSON object with a level."""
    p1 = cluster.cli(
        "p1-json", "run", "--group", cluster.group("p1"), "--member", "j", "--json-logs"
    )
    cluster.wait_led(["p1"])
    p1.stop()
    lines = [line for line in p1.log_path.read_text().splitlines() if line.strip()]
    assert lines, "the member logged nothing"
    docs = [json.loads(line) for line in lines]
    assert all({"time", "level", "logger", "message"} <= doc.keys() for doc in docs)
    assert any(doc["logger"].startswith("pricing_ha") for doc in docs)


async def test_readiness_checks_the_broker_through_librdkafka_with_the_security_settings(
    bootstrap: str,
) -> None:
    """broker_check passes on the real broker, and fails when the configured security (SASL
    here, against a plaintext listener) cannot be used: a TCP or ApiVersions probe passed."""
    good = load_config(None, {"PRICING_HA_BOOTSTRAP": bootstrap})
    assert await broker_check(good)() is True
    sasl = {
        "PRICING_HA_BOOTSTRAP": bootstrap,
        "PRICING_HA__BROKER__LIBRDKAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "PRICING_HA__BROKER__LIBRDKAFKA__SASL_MECHANISM": "PLAIN",
        "PRICING_HA__BROKER__LIBRDKAFKA__SASL_USERNAME": "nobody",
        "PRICING_HA__BROKER__LIBRDKAFKA__SASL_PASSWORD": "wrong",
    }
    with pytest.raises(Exception) as failed:  # noqa: PT011 - librdkafka's error, whatever it is
        await asyncio.wait_for(broker_check(load_config(None, sasl))(), 10)
    assert not isinstance(failed.value, TimeoutError)
