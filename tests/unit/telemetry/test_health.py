"""pricing_ha.telemetry.health without sockets: readiness checks and request parsing."""

from __future__ import annotations

import asyncio

import pytest

from pricing_ha.config import HealthConfig
from pricing_ha.telemetry import (
    CheckResult,
    HealthServer,
    Readiness,
    broker_reachable,
    health_port,
    tcp_reachable,
)
from pricing_ha.telemetry.health import _parse_request_line


async def test_readiness_reports_every_check_in_order() -> None:
    """Sync and async checks run; False, raising and too slow each fail with a reason."""

    async def slow() -> bool:
        await asyncio.sleep(10)
        return True

    async def async_ok() -> bool:
        return True

    def broken() -> bool:
        raise RuntimeError("topic md.quotes has 3 partitions")

    readiness = Readiness(check_timeout_s=0.05)
    readiness.add("sync_ok", lambda: True)
    readiness.add("async_ok", async_ok)
    readiness.add("false", lambda: False)
    readiness.add("broken", broken)
    readiness.add("slow", slow)
    results = await readiness.evaluate()
    assert [r.name for r in results] == ["sync_ok", "async_ok", "false", "broken", "slow"]
    assert [r.ok for r in results] == [True, True, False, False, False]
    assert results[2] == CheckResult("false", False, "check returned false")
    assert results[3].detail == "RuntimeError: topic md.quotes has 3 partitions"
    assert results[4].detail.startswith("timed out")


async def test_readiness_with_no_checks_is_ready_and_names_are_unique() -> None:
    """No checks means ready; a name can be registered once, and removed."""
    readiness = Readiness()
    assert await readiness.evaluate() == []
    readiness.add("broker", lambda: True)
    with pytest.raises(ValueError, match="broker"):
        readiness.add("broker", lambda: True)
    readiness.remove("broker")
    assert readiness.names == []


def test_a_server_shares_its_readiness_and_refuses_port_before_start() -> None:
    """add_check registers on the server's Readiness; port is unknown until started."""
    server = HealthServer(port=0)
    server.add_check("group", lambda: True)
    assert server.readiness.names == ["group"]
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", ("GET", "/readyz")),
        (b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n", ("HEAD", "/metrics")),
    ],
)
def test_request_line_is_parsed_and_query_dropped(head: bytes, expected: tuple[str, str]) -> None:
    """Method and path come from the request line; the query string is ignored."""
    assert _parse_request_line(head) == expected


@pytest.mark.parametrize(
    "head", [b"GET /\r\n\r\n", b"\x16\x03\x01 junk\r\n\r\n", b"GET / SPDY/3\r\n"]
)
def test_a_malformed_request_line_is_rejected(head: bytes) -> None:
    """Anything but 'METHOD target HTTP/1.x' is a ValueError (answered with 400)."""
    with pytest.raises(ValueError, match="bad request line"):
        _parse_request_line(head)


def test_ports_come_from_the_health_section() -> None:
    """Each process role reads its own [health] port."""
    cfg = HealthConfig(publisher_port=9101, relay_port=9102, subscriber_port=9103)
    assert [health_port(cfg, r) for r in ("publisher", "relay", "subscriber")] == [
        9101,
        9102,
        9103,
    ]


def test_tcp_check_needs_numeric_ports() -> None:
    """A bootstrap entry without a numeric port is refused up front."""
    with pytest.raises(ValueError, match="not host:port"):
        tcp_reachable("localhost:kafka")


class _Listener:
    """A local TCP server that reads one request and sends ``answer`` (``None``: stays silent)."""

    def __init__(self, answer: bytes | None) -> None:
        """Nothing served yet."""
        self.answer = answer
        self.handlers: list[asyncio.Task[None]] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        """Start listening; return ``host:port``."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.handlers.append(task)
            try:
                await reader.read(4096)
                if self.answer is not None:
                    writer.write(self.answer)
                    await writer.drain()
                await reader.read()  # until the client hangs up
            finally:
                writer.close()
                await writer.wait_closed()

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        """Stop listening once every connection has been closed."""
        assert self.server is not None
        await asyncio.wait_for(asyncio.gather(*self.handlers), 5)
        self.server.close()
        await self.server.wait_closed()


def _answer(correlation_id: int) -> bytes:
    return (8).to_bytes(4, "big") + correlation_id.to_bytes(4, "big") + bytes(4)


async def test_broker_check_needs_a_kafka_answer_not_just_a_connection() -> None:
    """A listener that accepts but never answers passes the TCP check and fails the broker check."""
    async with _Listener(None) as address:
        assert await tcp_reachable(address)() is True
        with pytest.raises(ConnectionError, match="no broker"):
            await broker_reachable(address, timeout_s=0.3)()


async def test_broker_check_passes_on_an_api_versions_answer() -> None:
    """An answer carrying the request's correlation id is a broker; another id is not."""
    async with _Listener(_answer(0x5052)) as good, _Listener(_answer(7)) as bad:
        assert await broker_reachable(good, timeout_s=1.0)() is True
        with pytest.raises(ConnectionError):
            await broker_reachable(bad, timeout_s=1.0)()
        # On TLS listeners only the connection is checked.
        assert await broker_reachable(bad, timeout_s=1.0, security_protocol="SSL")() is True
