"""Operations on a real broker: librdkafka statistics on /metrics, JSON logs, readiness."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from pricing_ha.config import load_config
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.waiting import wait_for
from pricing_ha.member.health import broker_check, read_health_file
from tests.unit.telemetry.prometheus_format import Family, parse


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


def _lags(url: str, client: str, topic: str) -> dict[str, float]:
    """Partition -> lag that ``client`` reports for ``topic`` on the /metrics at ``url``."""
    family = _metrics(url).get("pricing_ha_kafka_consumer_lag")
    return {
        labels["partition"]: lag
        for _, labels, lag in (family.samples if family else ())
        if labels["topic"] == topic and labels["client"] == client
    }


def test_publisher_and_relay_export_consumer_lag_queue_depth_and_broker_rtt(
    cluster: PricingCluster,
) -> None:
    """A publisher and a relay, each leading every partition, report their input's lag for
    each partition (md.quotes, prices.raw), producer queues and broker RTT, from librdkafka."""
    p1_file, relay_file = cluster.workdir / "p1-health.json", cluster.workdir / "r-health.json"
    p1 = cluster.cli(
        "p1-a", "run", "--group", cluster.group("p1"), "--member", "a",
        "--health-file", str(p1_file),
    )  # fmt: skip
    relay = cluster.cli(
        "relay-r1", "dedupe", "--group", cluster.group("relay"), "--member", "r1",
        "--health-file", str(relay_file),
    )  # fmt: skip
    cluster.wait_led(["p1", "relay"])
    cluster.feed(instruments=8, rate=20, duration=30)
    p1_url, relay_url = read_health_file(p1_file), read_health_file(relay_file)
    assert p1_url is not None, p1.log_tail()
    assert relay_url is not None, relay.log_tail()
    wanted = {str(p) for p in range(cluster.partitions)}
    for url, client, topic in (
        (p1_url, "a-quotes", cluster.topics["quotes"]),
        (relay_url, "relay-r1-raw", cluster.topics["raw"]),
    ):
        wait_for(
            lambda: set(_lags(url, client, topic)) == wanted,  # noqa: B023 - called at once
            60,
            lambda: f"{client}'s lag of every partition on /metrics: {_lags(url, client, topic)}",  # noqa: B023
        )
        assert all(lag >= 0 for lag in _lags(url, client, topic).values())
    for url, producer in ((p1_url, "a-prices"), (relay_url, "relay-r1-prices")):
        fams = _metrics(url)
        depth = fams["pricing_ha_kafka_producer_queue_depth"].samples
        assert any(labels["client"] == producer and v >= 0 for _, labels, v in depth), depth
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
