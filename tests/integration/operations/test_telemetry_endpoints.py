"""Telemetry over real sockets: the health endpoints, and OTLP/HTTP export to a local receiver."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from pricing_ha.config import AppConfig, TelemetryConfig
from pricing_ha.telemetry import HealthServer, broker_reachable, setup_telemetry, tcp_reachable
from tests.unit.telemetry.prometheus_format import parse, value


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """One HTTP request; returns status, headers and body (error statuses included)."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


async def _fetch(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(_get, url, method)


async def test_healthz_and_readyz_without_checks_are_ok() -> None:
    """/healthz answers 200 with the pid; /readyz with no checks is 200 'ready'."""
    async with HealthServer("127.0.0.1", 0) as server:
        assert server.port > 0
        status, headers, body = await _fetch(f"{server.url}/healthz")
        assert status == 200
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body)["status"] == "alive"
        status, _, body = await _fetch(f"{server.url}/readyz")
        assert (status, json.loads(body)["status"]) == (200, "ready")


async def test_unknown_paths_methods_and_garbage_get_errors() -> None:
    """404 for unknown paths, 405 for POST, 400 for a non-HTTP request; HEAD has no body."""
    async with HealthServer() as server:
        assert (await _fetch(f"{server.url}/nope"))[0] == 404
        assert (await _fetch(f"{server.url}/healthz", "POST"))[0] == 405
        status, headers, body = await _fetch(f"{server.url}/healthz", "HEAD")
        assert (status, body) == (200, b"")
        assert int(headers["Content-Length"]) > 0
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"hello\r\n\r\n")
        await writer.drain()
        response = await reader.read()
        writer.close()
        assert response.startswith(b"HTTP/1.1 400 ")


async def test_readyz_fails_while_the_broker_is_unreachable_and_recovers() -> None:
    """/readyz is 503 naming the broker check while nothing listens, 200 once it does."""
    probe = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()  # now a closed port
    async with HealthServer() as server:
        server.add_check("broker", tcp_reachable(f"127.0.0.1:{port}", timeout_s=0.5))
        server.add_check("group", lambda: True)
        status, _, body = await _fetch(f"{server.url}/readyz")
        doc = json.loads(body)
        assert status == 503
        assert doc["status"] == "not ready"
        assert doc["failing"] == ["broker"]
        assert "no broker at 127.0.0.1" in doc["checks"]["broker"]["detail"]
        assert doc["checks"]["group"] == {"ok": True, "detail": "ok"}
        broker = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", port)
        try:
            status, _, body = await _fetch(f"{server.url}/readyz")
        finally:
            broker.close()
            await broker.wait_closed()
        assert (status, json.loads(body)["failing"]) == (200, [])


async def test_readyz_passes_against_the_real_broker(bootstrap: str) -> None:
    """The broker-reachability check passes against the session's broker."""
    async with HealthServer() as server:
        server.add_check("broker", broker_reachable(bootstrap))
        status, _, body = await _fetch(f"{server.url}/readyz")
        assert status == 200, body


async def test_metrics_serves_valid_prometheus_text(tmp_path: Path) -> None:
    """/metrics is Prometheus 0.0.4 text with the process's counters."""
    cfg = AppConfig(telemetry=TelemetryConfig(traces_dir=tmp_path))
    tel = setup_telemetry(cfg, service_role="relay", group=None, member="r1", env={})
    try:
        tel.metrics.prices_relayed.add(7, {"partition": "2"})
        tel.metrics.latency.record(0.004, {"stage": "relay"})
        async with HealthServer(metrics=tel.prometheus_text) as server:
            status, headers, body = await _fetch(f"{server.url}/metrics")
    finally:
        tel.shutdown()
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    fams = parse(body.decode())
    assert value(fams, "pricing_ha_prices_relayed_total", partition="2") == 7
    assert value(fams, "pricing_ha_price_latency_seconds_count", stage="relay") == 1


async def test_metrics_failure_is_a_500_not_a_crash() -> None:
    """A metrics renderer that raises gives 500, and the server keeps serving."""

    def broken() -> str:
        raise RuntimeError("boom")

    async with HealthServer(metrics=broken) as server:
        assert (await _fetch(f"{server.url}/metrics"))[0] == 500
        assert (await _fetch(f"{server.url}/healthz"))[0] == 200


class _Receiver:
    """A minimal OTLP/HTTP receiver recording (path, content type, body) of every POST."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str, bytes]] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.path, self.headers["Content-Type"], body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def span_names(self, path: str) -> list[str]:
        names = []
        for p, _ctype, body in self.posts:
            if p == path:
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                names += [
                    s.name for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans
                ]
        return names


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    """A local OTLP/HTTP receiver."""
    r = _Receiver()
    yield r
    r.close()


@pytest.mark.parametrize("source", ["env", "config", "traces-env"])
def test_otlp_http_export_reaches_the_configured_endpoint(
    receiver: _Receiver, tmp_path: Path, source: str
) -> None:
    """Spans and metrics go over OTLP/HTTP; [telemetry] otlp_endpoint wins over OTEL_* vars."""
    closed = "http://127.0.0.1:1"
    endpoint, env, path = {
        "env": (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}, "/v1/traces"),
        "config": (receiver.url, {"OTEL_EXPORTER_OTLP_ENDPOINT": closed}, "/v1/traces"),
        "traces-env": (
            None,
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/custom/traces"},
            "/custom/traces",
        ),
    }[source]
    cfg = AppConfig(telemetry=TelemetryConfig(otlp_endpoint=endpoint, traces_dir=tmp_path))
    tel = setup_telemetry(cfg, service_role="publisher", group="p1", member="m1", env=env)
    assert tel.destination == f"otlp {receiver.url}{path}"
    assert tel.trace_file is None
    tel.tracer().start_span("neli.acquired").end()
    tel.metrics.prices_published.add(1, {"group": "p1", "partition": "0"})
    tel.shutdown()
    assert receiver.span_names(path) == ["neli.acquired"]
    ctypes = {ctype for p, ctype, _ in receiver.posts if p == path}
    assert ctypes == {"application/x-protobuf"}
    if source != "traces-env":
        assert any(p == "/v1/metrics" for p, _, _ in receiver.posts)
    assert list(tmp_path.iterdir()) == []  # nothing went to a file
