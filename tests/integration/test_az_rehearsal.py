"""Two AZs rehearsed in network namespaces (scripts/az-rehearsal): AZ a loses its network.

Unlike SIGKILL, a network cut leaves AZ a's members running and believing they lead, their TCP
connections silently blackholed. Two P1 members and relay member ``relay-a`` run in AZ a; two
P2 members and ``relay-b`` in AZ b; the feed and the verifying subscriber beside the broker. AZ
a is cut for 2·S, then restored. The verdict comes from the data: every quote the feed produced
reached ``prices`` exactly once, in order; and ``relay-a``, the exclusive stage, wrote nothing to
``prices`` later than its fencing bound (T + e after the cut, plus scheduling slack) while cut.
(Publishers are non-exclusive by design and keep leading provisionally while isolated,
``[neli] keep_leading_when_isolated``; the relay removes their duplicates.)

Needs root and iproute2; every namespace and process is removed at the end, pass or fail, and
nothing is routed outside 127.0.0.0/8 and the namespaces' own 10.213.0.0/16.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from pricing_ha.config import AppConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "az-rehearsal"
CLI = str(Path(sys.executable).parent / "pricing-ha")
BOOTSTRAP = "10.213.0.1:9092"
_DEFAULTS = AppConfig()
SESSION_S = _DEFAULTS.neli.session_timeout_ms / 1000  # the publishers' S (config/default.toml)
# The relay's own fencing bound, T + e (the broker also refuses a cut-off relay's writes).
RELAY_FENCE_S = (_DEFAULTS.relay.threshold_ms + _DEFAULTS.relay.clock_skew_ms) / 1000
SLACK_S = 1.0  # scheduling and flush slack on a loaded 2-core machine

# The relay's output is read back by this script, run inside the broker's namespace.
_READ_PRICES = """
import json, sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "az-rehearsal-check",
              "enable.auto.commit": False})
meta = c.list_topics("prices", timeout=10)
c.assign([TopicPartition("prices", p, 0) for p in meta.topics["prices"].partitions])
idle = 0
while idle < 20:
    m = c.poll(0.25)
    if m is None:
        idle += 1
        continue
    idle = 0
    if m.error():
        continue
    h = dict(m.headers() or [])
    print(json.dumps({"relay": h.get("relay", b"").decode(), "control": not m.value(),
                      "relay_ns": int(h.get("relay_ns", b"0") or 0)}))
c.close()
"""


def rehearsal(prefix: str, *args: str, timeout_s: float = 60) -> str:
    """Runs scripts/az-rehearsal with this test's namespace prefix; returns its stdout."""
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, "AZ_REHEARSAL_PREFIX": prefix, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"az-rehearsal {args}: {done.stderr}"
    return done.stdout


@pytest.fixture
def azs() -> Iterator[str]:
    """The rehearsal's namespaces (a fresh prefix), always torn down at the end."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns); run by scripts/slow-tests as root")
    prefix = "t" + uuid.uuid4().hex[:6]
    try:
        rehearsal(prefix, "up")
        yield prefix
    finally:
        rehearsal(prefix, "down")
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
        assert prefix not in left.stdout


class Procs:
    """Processes started in the namespaces; stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, prefix: str, logs: Path) -> None:
        self.prefix = prefix
        self.logs = logs
        self.started: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    def start(self, name: str, az: str, *argv: str) -> subprocess.Popen[bytes]:
        """Starts ``pricing-ha argv`` in AZ ``az`` (a, b or broker), logging to logs/name."""
        log = (self.logs / f"{name}.log").open("wb")
        self._logs.append(log)
        proc = subprocess.Popen(
            ["bash", str(SCRIPT), "exec", az, CLI, *argv, "--bootstrap", BOOTSTRAP],
            env={**os.environ, "AZ_REHEARSAL_PREFIX": self.prefix},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started[name] = proc
        return proc

    def stop_all(self) -> None:
        """SIGTERM to every process still running, SIGKILL after 15 s."""
        for proc in self.started.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.started.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for log in self._logs:
            log.close()


def test_cut_of_az_a_loses_and_duplicates_nothing(azs: str, tmp_path: Path) -> None:
    """AZ a cut for 2·S: prices complete, no duplicates, relay-a silent past its bound."""
    rehearsal(azs, "exec", "a", CLI, "topics", "create", "--bootstrap", BOOTSTRAP)
    procs = Procs(azs, tmp_path)
    try:
        for az, group in (("a", "p1"), ("b", "p2")):
            for i in (1, 2):
                procs.start(f"{group}-{i}", az, "run", "--group", group, "--member", f"{group}-{i}")
        procs.start("relay-a", "a", "dedupe", "--member", "relay-a")
        procs.start("relay-b", "b", "dedupe", "--member", "relay-b")
        time.sleep(4 * SESSION_S)  # groups formed, every partition led
        sub_out, feed_out = tmp_path / "subscriber.json", tmp_path / "feed.json"
        subscriber = procs.start(
            "subscriber", "broker", "subscribe", "--from-beginning", "--duration", "45",
            "--summary-out", str(sub_out),
        )  # fmt: skip
        feed = procs.start(
            "feed", "broker", "feed", "--instruments", "8", "--rate", "10", "--duration", "25",
            "--summary-out", str(feed_out),
        )  # fmt: skip
        time.sleep(2 * SESSION_S)
        cut_ns = time.time_ns()
        rehearsal(azs, "cut", "a")
        time.sleep(2 * SESSION_S)
        rehearsal(azs, "restore", "a")
        restore_ns = time.time_ns()
        assert feed.wait(60) == 0, (tmp_path / "feed.log").read_text()[-3000:]
        subscriber.wait(60)
        # relay-a's writes to prices while it was cut off, past its fencing bound.
        read = subprocess.run(
            ["bash", str(SCRIPT), "exec", "broker", sys.executable, "-c", _READ_PRICES, BOOTSTRAP],
            env={**os.environ, "AZ_REHEARSAL_PREFIX": azs},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        procs.stop_all()
    records = [json.loads(line) for line in read.stdout.splitlines()]
    assert {r["relay"] for r in records} & {"relay-a", "relay-b"}, "no relayed prices"
    bound_ns = cut_ns + int((RELAY_FENCE_S + SLACK_S) * 1e9)
    # Prices only: a takeover/release marker (a control record, empty value) carries no price.
    late = [
        r
        for r in records
        if r["relay"] == "relay-a" and not r["control"] and bound_ns < r["relay_ns"] < restore_ns
    ]
    assert not late, f"relay-a emitted {len(late)} prices after its fence while cut off"
    produced = json.loads(feed_out.read_text())
    verdict = json.loads(sub_out.read_text())
    assert verdict["duplicates"] == 0, verdict
    assert verdict["out_of_order"] == 0, verdict
    assert verdict["gaps"] == 0, verdict
    last_seq = {
        name: row["last_seq"] for name, row in produced["instruments"].items() if row["last_seq"]
    }
    assert last_seq, produced
    for name, seq in last_seq.items():
        row = verdict["instruments"][name]
        assert row["last_seq"] == seq, (name, row, seq)
        assert row["delivered"] == seq - row["first_seq"] + 1, (name, row)
        assert row["first_seq"] == 1, (name, row)
