"""``/healthz``, ``/readyz`` and ``/metrics`` of a long-running process (asyncio, stdlib only).

* ``GET /healthz``: 200 while the process's event loop answers (liveness).
* ``GET /readyz``: 200 when every registered readiness check passes, else 503. The JSON body
  names every check, whether it passed and why not::

      {"status": "not ready", "failing": ["broker"],
       "checks": {"broker": {"ok": false, "detail": "no broker at 127.0.0.1:9092 answered"}}}

  A check is a callable returning a bool (or an awaitable of one); raising or taking longer
  than ``check_timeout_s`` counts as failing. Checks run concurrently at every request.
* ``GET /metrics``: Prometheus text format 0.0.4, from the ``metrics`` callable (usually
  :meth:`pricing_ha.telemetry.Telemetry.prometheus_text`), rendered off the event loop.

The server speaks just enough HTTP/1.1 for probes and scrapers: one request per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pricing_ha.config import HealthConfig
from pricing_ha.telemetry.prometheus import CONTENT_TYPE as METRICS_CONTENT_TYPE

__all__ = [
    "AsyncCheck",
    "Check",
    "CheckResult",
    "HealthServer",
    "Readiness",
    "broker_reachable",
    "health_port",
    "tcp_reachable",
]

log = logging.getLogger("pricing_ha.health")

#: A readiness check: True when ready; may be async; raising means "not ready".
Check = Callable[[], bool | Awaitable[bool]]
#: An asynchronous readiness check (what :func:`broker_reachable` and :func:`tcp_reachable` make).
AsyncCheck = Callable[[], Awaitable[bool]]

_REQUEST_TIMEOUT_S = 5.0
_MAX_HEAD = 8192
_JSON = "application/json"
_REASONS = {
    200: "OK",
    404: "Not Found",
    405: "Method Not Allowed",
    400: "Bad Request",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one readiness check."""

    name: str
    ok: bool
    detail: str


class Readiness:
    """A named set of readiness checks.

    Args:
        check_timeout_s: a check that takes longer fails.
    """

    def __init__(self, check_timeout_s: float = 2.0) -> None:
        """Start with no checks (ready)."""
        self.check_timeout_s = check_timeout_s
        self._checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        """Register ``check`` under ``name``.

        Raises:
            ValueError: ``name`` is already registered.
        """
        if name in self._checks:
            raise ValueError(f"readiness check {name!r} is already registered")
        self._checks[name] = check

    def remove(self, name: str) -> None:
        """Unregister a check (no error if absent)."""
        self._checks.pop(name, None)

    @property
    def names(self) -> list[str]:
        """The registered checks, in registration order."""
        return list(self._checks)

    async def evaluate(self) -> list[CheckResult]:
        """Run every check concurrently; results in registration order."""
        return list(await asyncio.gather(*(self._run(n, c) for n, c in list(self._checks.items()))))

    async def _run(self, name: str, check: Check) -> CheckResult:
        try:
            async with asyncio.timeout(self.check_timeout_s):
                result = check()
                if inspect.isawaitable(result):
                    result = await result
        except TimeoutError:
            return CheckResult(name, False, f"timed out after {self.check_timeout_s} s")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken check is "not ready", not a 500
            return CheckResult(name, False, f"{type(exc).__name__}: {exc}")
        return CheckResult(name, bool(result), "ok" if result else "check returned false")


def _split_host_port(server: str) -> tuple[str, int]:
    address = server.strip().rsplit("://", 1)[-1]
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"bootstrap server {server!r} is not host:port")
    return host.strip("[]") or "localhost", int(port)


def tcp_reachable(bootstrap_servers: str, timeout_s: float = 1.0) -> AsyncCheck:
    """A check that passes when any of ``host:port[,host:port...]`` accepts a TCP connection.

    Raises:
        ValueError: an entry has no numeric port.
    """
    return _reachable(bootstrap_servers, timeout_s, handshake=False)


def broker_reachable(
    bootstrap_servers: str, timeout_s: float = 1.0, *, security_protocol: str = "plaintext"
) -> AsyncCheck:
    """A check that passes when any bootstrap server answers a Kafka request.

    On plaintext (and SASL_PLAINTEXT) listeners it sends an ApiVersions request (allowed before
    authentication) and waits for the answer, so a broker that accepts connections but does not
    serve them (paused, overloaded, wedged) fails the check. On TLS listeners it only checks
    that a TCP connection is accepted (a TLS handshake is librdkafka's business).

    Raises:
        ValueError: an entry has no numeric port.
    """
    handshake = security_protocol.lower() not in _TLS_PROTOCOLS
    return _reachable(bootstrap_servers, timeout_s, handshake=handshake)


_API_VERSIONS = 18
_CORRELATION_ID = 0x5052
_TLS_PROTOCOLS = frozenset({"ssl", "sasl_ssl"})


def _api_versions_request() -> bytes:
    client = b"pricing-ha-readyz"
    body = struct.pack(">hhih", _API_VERSIONS, 0, _CORRELATION_ID, len(client)) + client
    return struct.pack(">i", len(body)) + body


def _reachable(bootstrap_servers: str, timeout_s: float, *, handshake: bool) -> AsyncCheck:
    targets = [_split_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]

    async def ask(host: str, port: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            if handshake:
                writer.write(_api_versions_request())
                await writer.drain()
                size, correlation = struct.unpack(">ii", await reader.readexactly(8))
                if correlation != _CORRELATION_ID or size < 4:
                    raise ConnectionError(f"{host}:{port} answered something else than Kafka")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def reachable() -> bool:
        for host, port in targets:
            try:
                async with asyncio.timeout(timeout_s):
                    await ask(host, port)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                continue  # ConnectionError is an OSError
            return True
        raise ConnectionError(f"no broker at {bootstrap_servers} answered")

    return reachable


def health_port(cfg: HealthConfig, role: Literal["publisher", "relay", "subscriber"]) -> int:
    """The configured port of a process role (``[health] <role>_port``)."""
    port: int = getattr(cfg, f"{role}_port")
    return port


class HealthServer:
    """Serves ``/healthz``, ``/readyz`` and ``/metrics`` on ``host:port``.

    Use as an async context manager, or call :meth:`start` and :meth:`close`.

    Args:
        host: bind address.
        port: TCP port; 0 picks a free one (see :attr:`port`).
        metrics: renders the ``/metrics`` body; ``None`` serves an empty exposition.
        readiness: the checks behind ``/readyz`` (a new empty set by default).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        metrics: Callable[[], str] | None = None,
        readiness: Readiness | None = None,
    ) -> None:
        """Prepare; nothing listens until :meth:`start`."""
        self.host = host
        self._requested_port = port
        self._metrics = metrics
        self.readiness = readiness if readiness is not None else Readiness()
        self._server: asyncio.Server | None = None
        self._started = time.monotonic()

    def add_check(self, name: str, check: Check) -> None:
        """Register a readiness check (see :class:`Readiness`)."""
        self.readiness.add(name, check)

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the health server is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving."""
        self._server = await asyncio.start_server(
            self._handle, self.host, self._requested_port, limit=_MAX_HEAD
        )
        log.info("health endpoints on %s", self.url)

    async def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> HealthServer:
        """Start serving."""
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Stop serving."""
        await self.close()

    # -- HTTP ---------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_REQUEST_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            method, path = _parse_request_line(head)
            status, ctype, body = await self._respond(method, path)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, ctype, body, method = 400, "text/plain", b"bad request\n", "GET"
        except ValueError:
            status, ctype, body, method = 400, "text/plain", b"bad request\n", "GET"
        except ConnectionError:
            writer.close()
            return
        headers = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
            f"Content-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\n"
            "Connection: close\r\n\r\n"
        )
        try:
            writer.write(headers.encode("ascii") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        if path not in ("/healthz", "/readyz", "/metrics"):
            return 404, "text/plain", b"not found\n"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        if path == "/healthz":
            uptime = round(time.monotonic() - self._started, 3)
            return 200, _JSON, _json({"status": "alive", "pid": os.getpid(), "uptime_s": uptime})
        if path == "/readyz":
            results = await self.readiness.evaluate()
            failing = [r.name for r in results if not r.ok]
            doc = {
                "status": "not ready" if failing else "ready",
                "failing": failing,
                "checks": {r.name: {"ok": r.ok, "detail": r.detail} for r in results},
            }
            return (503 if failing else 200), _JSON, _json(doc)
        try:
            text = await asyncio.to_thread(self._metrics) if self._metrics is not None else ""
        except Exception:
            log.exception("rendering /metrics failed")
            return 500, "text/plain", b"metrics unavailable\n"
        return 200, METRICS_CONTENT_TYPE, text.encode()


def _json(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def _parse_request_line(head: bytes) -> tuple[str, str]:
    """``(method, path)`` from an HTTP request head; the query string is dropped.

    Raises:
        ValueError: not an HTTP/1.x request line.
    """
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"bad request line {line!r}")
    method, target, _version = parts
    return method, target.split("?", 1)[0]
