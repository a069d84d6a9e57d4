"""librdkafka statistics (stats_cb) exported as metrics: lag, producer queues, broker RTT."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Consumer

from pricing_ha.config import AppConfig, TelemetryConfig, load_config
from pricing_ha.dedupe.relay_clients import RelayClients
from pricing_ha.errors import ConfigError
from pricing_ha.telemetry import setup_telemetry
from tests.unit.telemetry.prometheus_format import parse, value


def _consumer_stats(client: str, lag: int) -> str:
    """A consumer's statistics as librdkafka writes them (the fields read, and some others)."""
    return json.dumps(
        {
            "name": "rdkafka#consumer-1",
            "client_id": client,
            "type": "consumer",
            "msg_cnt": 0,
            "brokers": {
                "127.0.0.1:9092/bootstrap": {"nodeid": -1, "rtt": {"avg": 0, "p99": 0, "cnt": 0}},
                "127.0.0.1:9092/1": {
                    "nodeid": 1,
                    "state": "UP",
                    "rtt": {"min": 100, "max": 9000, "avg": 1500, "p99": 8000, "cnt": 12},
                },
            },
            "topics": {
                "md.quotes": {
                    "partitions": {
                        "0": {"partition": 0, "fetch_state": "active", "consumer_lag": lag},
                        "1": {"partition": 1, "fetch_state": "active", "consumer_lag": -1},
                        "2": {"partition": 2, "fetch_state": "none", "consumer_lag": 4},
                        "-1": {"partition": -1, "fetch_state": "none", "consumer_lag": -1},
                    }
                }
            },
        }
    )


def _producer_stats(client: str, queued: int) -> str:
    """A producer's statistics: records and bytes waiting."""
    return json.dumps(
        {
            "name": "rdkafka#producer-2",
            "client_id": client,
            "type": "producer",
            "msg_cnt": queued,
            "msg_size": queued * 100,
            "brokers": {},
            "topics": {},
        }
    )


def _telemetry(tmp_path: Path, interval_ms: int = 1000) -> Any:
    cfg = AppConfig(
        telemetry=TelemetryConfig(traces_dir=tmp_path, kafka_stats_interval_ms=interval_ms)
    )
    return setup_telemetry(cfg, service_role="relay", group=None, member="r1", env={})


def test_consumer_lag_producer_queue_and_broker_rtt_reach_metrics(tmp_path: Path) -> None:
    """Known lags of assigned partitions, queue depth and per-broker RTT appear on /metrics."""
    tel = _telemetry(tmp_path)
    try:
        tel.kafka_stats.on_stats(_consumer_stats("m1-quotes", 42))
        tel.kafka_stats.on_stats(_producer_stats("m1-prices", 7))
        fams = parse(tel.prometheus_text())
        lag = "pricing_ha_kafka_consumer_lag"
        assert value(fams, lag, client="m1-quotes", topic="md.quotes", partition="0") == 42
        assert {lab["partition"] for _, lab, _ in fams[lag].samples} == {"0"}  # unknown: absent
        depth = "pricing_ha_kafka_producer_queue_depth"
        assert value(fams, depth, client="m1-prices") == 7
        assert value(fams, "pricing_ha_kafka_producer_queue_size_bytes", client="m1-prices") == 700
        rtt = "pricing_ha_kafka_broker_rtt_seconds"
        assert value(fams, rtt, client="m1-quotes", broker="1", stat="avg") == pytest.approx(0.0015)
        assert value(fams, rtt, client="m1-quotes", broker="1", stat="p99") == pytest.approx(0.008)
        assert {lab["broker"] for _, lab, _ in fams[rtt].samples} == {"1"}  # no bootstrap entry
        tel.kafka_stats.on_stats(_consumer_stats("m1-quotes", 3))  # the newest report wins
        assert value(parse(tel.prometheus_text()), lag, partition="0") == 3
    finally:
        tel.shutdown()


def test_a_client_that_stops_reporting_is_dropped_after_three_intervals(tmp_path: Path) -> None:
    """A closed client's last figures do not linger on /metrics."""
    now = [100.0]
    tel = _telemetry(tmp_path, interval_ms=1000)
    try:
        tel.kafka_stats._clock = lambda: now[0]
        tel.kafka_stats.on_stats(_consumer_stats("gone", 5))
        now[0] += 2.9
        assert "pricing_ha_kafka_consumer_lag" in parse(tel.prometheus_text())
        now[0] += 0.2
        assert "pricing_ha_kafka_consumer_lag" not in parse(tel.prometheus_text())
    finally:
        tel.shutdown()


def test_unreadable_statistics_are_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A statistics document that is not JSON is logged once and changes nothing."""
    tel = _telemetry(tmp_path)
    try:
        tel.kafka_stats.on_stats("{not json")
        assert "pricing_ha_kafka_consumer_lag" not in parse(tel.prometheus_text())
        assert "not understood" in caplog.text
    finally:
        tel.shutdown()


def test_interval_setting_is_validated_and_zero_turns_statistics_off(tmp_path: Path) -> None:
    """kafka_stats_interval_ms: 0 (off) or 100..3600000; off means no client settings."""
    for bad in (-1, 50, 3_600_001):
        with pytest.raises(ConfigError, match=r"telemetry\.kafka_stats_interval_ms"):
            load_config(None, {"PRICING_HA__TELEMETRY__KAFKA_STATS_INTERVAL_MS": str(bad)})
    tel = _telemetry(tmp_path, interval_ms=0)
    try:
        assert tel.kafka_stats.settings() == {}
    finally:
        tel.shutdown()


def test_relay_raw_consumer_is_built_with_the_statistics_callback(tmp_path: Path) -> None:
    """The relay's prices.raw consumer gets statistics.interval.ms and the stats_cb."""
    tel = _telemetry(tmp_path, interval_ms=2500)
    seen: list[dict[str, Any]] = []
    try:

        def capture(settings: dict[str, Any]) -> Consumer:
            seen.append(settings)
            return cast(Consumer, object())

        clients = RelayClients(consumer=capture)
        clients.raw_consumer(AppConfig(), "relay", "r1", tel.kafka_stats.settings())
        (settings,) = seen
        assert settings["statistics.interval.ms"] == 2500
        assert settings["stats_cb"] == tel.kafka_stats.on_stats
        assert settings["client.id"] == "relay-r1-raw"
    finally:
        tel.shutdown()
