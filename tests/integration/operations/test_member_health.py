"""The health endpoints of a member (/readyz checks broker, NELI, topic layout), over sockets."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pricing_ha.config import AppConfig, BrokerConfig, TelemetryConfig, TopicsConfig
from pricing_ha.member.health import (
    health_in_thread,
    member_health,
    read_health_file,
)
from pricing_ha.telemetry import (
    HealthServer,
    Telemetry,
    broker_reachable,
    setup_telemetry,
)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _not_joined() -> bool:
    raise RuntimeError("NELI has not joined its group yet")


async def test_readyz_names_every_failing_check_while_the_broker_is_unreachable(
    tmp_path: Path,
) -> None:
    """No broker: /readyz is 503 with broker, topics and neli failing; /healthz stays 200."""
    cfg = AppConfig(
        broker=BrokerConfig(bootstrap_servers=f"127.0.0.1:{_closed_port()}"),
        telemetry=TelemetryConfig(traces_dir=tmp_path / "traces"),
    )
    telemetry = Telemetry.noop()
    health_file = tmp_path / "h" / "health.json"
    async with member_health(
        cfg, "relay", telemetry, member_ready=_not_joined, health_file=health_file
    ) as server:
        url = read_health_file(health_file)
        assert url == server.url
        status, body = await asyncio.to_thread(_get, f"{url}/readyz")
        doc = json.loads(body)
        assert status == 503
        assert doc["failing"] == ["broker", "neli", "topics"]
        assert doc["checks"]["neli"]["detail"] == "RuntimeError: NELI has not joined its group yet"
        assert "no broker" in doc["checks"]["broker"]["detail"]
        assert (await asyncio.to_thread(_get, f"{url}/healthz"))[0] == 200
    assert json.loads(health_file.read_text())["role"] == "relay"


async def test_readyz_reports_a_missing_topic_and_metrics_are_served(
    bootstrap: str, tmp_path: Path
) -> None:
    """Real broker, a topic missing: only 'topics' fails, naming it; /metrics has the counters."""
    cfg = AppConfig(
        broker=BrokerConfig(bootstrap_servers=bootstrap),
        topics=TopicsConfig(quotes=f"md.quotes-missing-{tmp_path.name}"),
        telemetry=TelemetryConfig(traces_dir=tmp_path / "traces"),
    )
    telemetry = setup_telemetry(cfg, service_role="relay", group=None, member="r1", env={})
    try:
        telemetry.metrics.prices_relayed.add(3, {"partition": "1"})
        async with member_health(cfg, "relay", telemetry, member_ready=lambda: True) as server:
            status, body = await asyncio.to_thread(_get, f"{server.url}/readyz")
            doc = json.loads(body)
            assert status == 503
            assert doc["failing"] == ["topics"]
            detail = doc["checks"]["topics"]["detail"]
            assert detail.startswith("TopicLayoutError: topic layout does not match")
            assert cfg.topics.quotes in detail
            status, body = await asyncio.to_thread(_get, f"{server.url}/metrics")
            assert status == 200
            assert b'pricing_ha_prices_relayed_total{partition="1"} 3' in body
    finally:
        telemetry.shutdown()


def test_a_synchronous_command_serves_health_from_a_thread(bootstrap: str) -> None:
    """health_in_thread: the feed's endpoints answer while the main thread works; then stop."""
    server = HealthServer(metrics=lambda: "# nothing\n")
    server.add_check("broker", broker_reachable(bootstrap))
    with health_in_thread(server):
        url = server.url
        assert _get(f"{url}/healthz")[0] == 200
        assert _get(f"{url}/readyz")[0] == 200
    try:
        urllib.request.urlopen(f"{url}/healthz", timeout=2)
    except OSError:
        pass
    else:
        raise AssertionError("the health server still answers after the block")


async def test_broker_check_fails_while_the_broker_is_paused(own_broker: Any) -> None:
    """A broker that still accepts connections but serves nothing (SIGSTOP) is not ready."""
    check = broker_reachable(own_broker.bootstrap, timeout_s=0.5)
    assert await check() is True
    own_broker.pause()
    try:
        with pytest.raises(ConnectionError, match="no broker"):
            await check()
    finally:
        own_broker.resume()
    assert await check() is True
