"""A command pointed at a broker that is down says so in one line (librdkafka's log on demand)."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from pricing_ha.local.cluster import pricing_cli

COMMANDS = [
    ["status"],
    ["subscribe", "--duration", "5"],
    ["run", "--group", "p1"],
    ["dedupe"],
    ["topics", "check"],
    ["feed", "--duration", "5"],
]


def _closed_port() -> int:
    """A local TCP port nobody listens on (bound once by us, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], port: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICING_HA")}
    env["PRICING_HA__BROKER__CONNECT_TIMEOUT_MS"] = "1500"
    return subprocess.run(
        [*pricing_cli(), *args, "--bootstrap", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_broker_down_is_one_line_on_stderr(command: list[str]) -> None:
    """Against a closed port: exit 3 and exactly one stderr line, the broker-did-not-answer one."""
    port = _closed_port()
    result = _run(command, port)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: the broker at 127.0.0.1:{port} did not answer"), lines


def test_verbose_shows_librdkafkas_connection_log() -> None:
    """--verbose keeps librdkafka's own lines (each failed connection attempt) before the error."""
    port = _closed_port()
    result = _run(["status", "--verbose"], port)
    assert result.returncode == 3, result.stderr
    assert sum("Connection refused" in line for line in result.stderr.splitlines()) >= 2
