"""Three AZs rehearsed in network namespaces (scripts/az-rehearsal): AZ a, broker included, cut.

The production topology: AZ a holds broker 1 (rack a), the P1 member and relay member
``relay-a``; AZ b holds broker 2 (rack b), the P2 member and ``relay-b``; AZ c holds broker 3
(rack c), the feed and the verifying subscriber. The brokers are one KRaft cluster, every topic
at three replicas with ``min.insync.replicas = 2`` and no unclean leader election. Unlike
SIGKILL, the cut leaves AZ a's broker and members running, believing what they believed, their
connections to the other AZs silently blackholed. AZ a is cut for 20 s under load, then healed.

The verdict comes from the data, read from AZ c: every quote the feed had acknowledged reached
``prices`` (``read_committed``) exactly once and in order; nothing ``relay-a`` stamped while cut
off is visible there (the broker fences it: its partitions' transactions cannot commit without
the other AZs, and relay-b's takeover fences its producers); no instrument was silent longer
than the bound; every process survived; and after healing broker 1 is back in the ISR of every
partition. (Publishers are non-exclusive by design and keep leading provisionally while
isolated, ``[neli] keep_leading_when_isolated``; the relay removes their duplicates.)

Needs root and iproute2; every namespace and process is removed at the end, pass or fail, and
nothing is routed outside the namespaces' own 10.213.0.0/16.
"""

from __future__ import annotations

import itertools
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
from typing import IO, Any

import pytest

from pricing_ha.config import AppConfig
from pricing_ha.local.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "az-rehearsal"
CLI = str(Path(sys.executable).parent / "pricing-ha")
BOOTSTRAP = "10.213.1.2:9092,10.213.2.2:9092,10.213.3.2:9092"
# Three replicas for every topic the commands create (min.insync.replicas 2 is the brokers').
ENV = {"PRICING_HA__TOPICS__REPLICATION_FACTOR": "3"}
_DEFAULTS = AppConfig()
SESSION_S = _DEFAULTS.neli.session_timeout_ms / 1000  # the publishers' S (config/default.toml)
CUT_S = 20.0
RATE_HZ = 20  # quotes per second per instrument
INSTRUMENTS = 8
# The longest silence allowed on an instrument across the cut, measured as the subscriber sees
# it: the cluster's own recovery from losing broker 1 (the controller fences it after
# broker.session.timeout.ms = 3 s, then the partitions it led elect new leaders and clients
# refresh their metadata), then relay-b's takeover of relay-a's partitions (its detector, and
# the abort of relay-a's open transactions), with margin for a loaded 2-core machine.
SILENCE_BOUND_S = 10.0

# Run inside AZ c: the topics' replication, min ISR and unclean-election setting, and whether
# every partition has all three brokers in its ISR (argv: bootstrap, seconds to wait for that).
_CLUSTER_STATE = """
import json, sys, time
from confluent_kafka.admin import AdminClient, ConfigResource
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
topics = ["md.quotes", "pricing.neli", "prices.raw", "prices"]
deadline = time.monotonic() + float(sys.argv[2])
while True:
    meta = admin.list_topics(timeout=10)
    short = sorted(f"{t}[{p.id}] isr={sorted(p.isrs)}" for t in topics
                   for p in meta.topics[t].partitions.values() if sorted(p.isrs) != [1, 2, 3])
    if not short or time.monotonic() > deadline:
        break
    time.sleep(0.5)
configs = {}
for res, fut in admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]).items():
    entries = fut.result(10)
    configs[res.name] = {k: entries[k].value for k in
                         ("min.insync.replicas", "unclean.leader.election.enable")}
print(json.dumps({
    "brokers": {b.id: b.host for b in meta.brokers.values()},
    "replicas": {t: sorted({len(p.replicas) for p in meta.topics[t].partitions.values()})
                 for t in topics},
    "configs": configs, "short_isr": short,
}))
"""

# Run inside AZ c: every record of prices, read_committed, in offset order per partition: its
# partition, instrument and seq, relay and relay_ns headers.
_READ_PRICES = """
import json, sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "az-rehearsal-check",
              "enable.auto.commit": False, "isolation.level": "read_committed"})
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
    price = json.loads(m.value()) if m.value() else {}
    print(json.dumps({"relay": h.get("relay", b"").decode(), "control": not m.value(),
                      "relay_ns": int(h.get("relay_ns", b"0") or 0), "partition": m.partition(),
                      "instrument": price.get("instrument"), "seq": price.get("seq")}))
c.close()
"""


# Run inside AZ c: how far behind now the newest price on each partition of prices is (seconds),
# or null for a partition with none yet: the pipeline is live when every one is recent.
_LAG = """
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "az-rehearsal-lag",
              "enable.auto.commit": False, "isolation.level": "read_committed"})
parts = list(c.list_topics("prices", timeout=10).topics["prices"].partitions)
newest = dict.fromkeys(parts, 0)
tps = []
for p in parts:
    low, high = c.get_watermark_offsets(TopicPartition("prices", p), timeout=10)
    tps.append(TopicPartition("prices", p, max(low, high - 20)))
c.assign(tps)
# Only the tail as it was: the live stream never goes idle.
deadline = time.monotonic() + 5
while time.monotonic() < deadline:
    m = c.poll(0.25)
    if m is None or m.error():
        continue
    relay_ns = int(dict(m.headers() or []).get("relay_ns", b"0") or 0)
    newest[m.partition()] = max(newest[m.partition()], relay_ns)
c.close()
now = time.time_ns()
print(json.dumps({p: (now - ns) / 1e9 if ns else None for p, ns in newest.items()}))
"""
LIVE_LAG_S = 3.0  # the pipeline counts as live once every partition's newest price is this recent


def rehearsal(prefix: str, *args: str, timeout_s: float = 240) -> str:
    """Runs scripts/az-rehearsal with this test's namespace prefix; returns its stdout."""
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, **ENV, "AZ_REHEARSAL_PREFIX": prefix, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"az-rehearsal {args}: {done.stderr}"
    return done.stdout


def in_az_c(prefix: str, script: str, *argv: str) -> str:
    """Runs a Python ``script`` inside AZ c with ``argv``; returns its stdout."""
    return rehearsal(prefix, "exec", "c", sys.executable, "-c", script, *argv)


@pytest.fixture
def azs() -> Iterator[str]:
    """The rehearsal's namespaces and brokers (a fresh prefix), always torn down at the end."""
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
        """Starts ``pricing-ha argv`` in AZ ``az`` (a, b or c), logging to logs/name."""
        log = (self.logs / f"{name}.log").open("wb")
        self._logs.append(log)
        proc = subprocess.Popen(
            ["bash", str(SCRIPT), "exec", az, CLI, *argv, "--bootstrap", BOOTSTRAP],
            env={**os.environ, **ENV, "AZ_REHEARSAL_PREFIX": self.prefix},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started[name] = proc
        return proc

    def exited(self) -> dict[str, int]:
        """The processes that have exited, with their status."""
        return {n: p.returncode for n, p in self.started.items() if p.poll() is not None}

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


def _check_topology(state: dict[str, Any]) -> None:
    """Three brokers at their AZs' addresses; three replicas, min ISR 2, no unclean election."""
    assert state["brokers"] == {"1": "10.213.1.2", "2": "10.213.2.2", "3": "10.213.3.2"}
    assert all(r == [3] for r in state["replicas"].values()), state
    for topic, cfg in state["configs"].items():
        assert cfg == {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}, (
            topic,
            cfg,
        )


def _read_prices(prefix: str) -> list[dict[str, Any]]:
    """Every record of prices, read_committed from AZ c."""
    return [json.loads(line) for line in in_az_c(prefix, _READ_PRICES, BOOTSTRAP).splitlines()]


def _seqs(records: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each instrument's seqs on prices in the order a reader gets them (offset order)."""
    seqs: dict[str, list[int]] = {}
    for r in records:
        if not r["control"]:
            seqs.setdefault(r["instrument"], []).append(r["seq"])
    return seqs


def _silences_on_prices(records: list[dict[str, Any]], cut_ns: int) -> dict[int, str]:
    """Per partition of prices, its longest gap between relayed prices: when, and who wrote."""
    out: dict[int, str] = {}
    for partition in sorted({r["partition"] for r in records}):
        rows = sorted(
            (r["relay_ns"], r["relay"]) for r in records if r["partition"] == partition
            and not r["control"]
        )  # fmt: skip
        gaps = [(b[0] - a[0], a, b) for a, b in itertools.pairwise(rows)]
        if gaps:
            gap, (start, before), (_, after) = max(gaps)
            out[partition] = (
                f"{gap / 1e9:.2f} s from cut{(start - cut_ns) / 1e9:+.2f} s, {before} -> {after}"
            )
    return out


def test_cut_of_az_a_with_its_broker_loses_and_duplicates_nothing(azs: str, tmp_path: Path) -> None:
    """AZ a (broker 1, P1, relay-a) cut 20 s: prices complete, in order, bounded silence."""
    rehearsal(azs, "exec", "c", CLI, "topics", "create", "--bootstrap", BOOTSTRAP)
    _check_topology(json.loads(in_az_c(azs, _CLUSTER_STATE, BOOTSTRAP, "30")))
    procs = Procs(azs, tmp_path)
    survivors: dict[str, int] = {}
    try:
        procs.start("p1-1", "a", "run", "--group", "p1", "--member", "p1-1")
        procs.start("p2-1", "b", "run", "--group", "p2", "--member", "p2-1")
        procs.start("relay-a", "a", "dedupe", "--member", "relay-a")
        procs.start("relay-b", "b", "dedupe", "--member", "relay-b")
        time.sleep(4 * SESSION_S)  # groups formed, every partition led
        sub_out, feed_out = tmp_path / "subscriber.json", tmp_path / "feed.json"
        subscriber = procs.start(
            "subscriber", "c", "subscribe", "--from-beginning", "--duration", "600",
            "--summary-out", str(sub_out),
        )  # fmt: skip
        feed = procs.start(
            "feed", "c", "feed", "--instruments", str(INSTRUMENTS), "--rate", str(RATE_HZ),
            "--duration", "400", "--summary-out", str(feed_out),
        )  # fmt: skip
        lag: dict[str, float | None] = {}

        def pipeline_live() -> bool:
            lag.update(json.loads(in_az_c(azs, _LAG, BOOTSTRAP)))
            return all(v is not None and v <= LIVE_LAG_S for v in lag.values())

        # Cut a live pipeline, not one still catching up with its start on a loaded machine.
        wait_for(pipeline_live, 150, lambda: f"prices live (lag per partition: {lag})")
        time.sleep(3)
        rehearsal(azs, "cut", "a")
        cut_ns = time.time_ns()  # the link is down: nothing AZ a stamps from now on gets out
        time.sleep(CUT_S)
        rehearsal(azs, "restore", "a")
        restore_ns = time.time_ns()
        time.sleep(12)  # the feed goes on after the heal
        feed.send_signal(signal.SIGTERM)  # it writes its summary and exits
        assert feed.wait(90) == 0, (tmp_path / "feed.log").read_text()[-3000:]
        produced = json.loads(feed_out.read_text())
        last_seq = {n: r["last_seq"] for n, r in produced["instruments"].items() if r["last_seq"]}
        assert len(last_seq) == INSTRUMENTS, produced
        records: list[dict[str, Any]] = []

        def every_acknowledged_quote_priced() -> bool:
            records[:] = _read_prices(azs)
            seqs = _seqs(records)
            return all(max(seqs.get(n, [0])) >= seq for n, seq in last_seq.items())

        wait_for(every_acknowledged_quote_priced, 150, lambda: f"prices: {_seqs(records)}")
        survivors = procs.exited()
        subscriber.send_signal(signal.SIGTERM)  # it writes its verdict and exits
        assert subscriber.wait(30) == 0
        # Healed: broker 1 rejoins the ISR of every partition.
        healed = json.loads(in_az_c(azs, _CLUSTER_STATE, BOOTSTRAP, "90"))
    finally:
        procs.stop_all()
    assert set(survivors) == {"feed"}, f"exited: {survivors}"
    assert healed["short_isr"] == [], healed
    assert {r["relay"] for r in records} >= {"relay-a", "relay-b"}, "both relays emitted"
    zombie = [r for r in records if r["relay"] == "relay-a" and cut_ns < r["relay_ns"] < restore_ns]
    assert not zombie, f"{len(zombie)} records relay-a stamped while cut off are visible"
    # Exactly once and in order: each instrument's seqs on prices are 1..last, nothing else.
    seqs = _seqs(records)
    for name, seq in last_seq.items():
        got = seqs[name]
        assert got == list(range(1, len(got) + 1)), (name, got[:50])
        assert len(got) >= seq, (name, len(got), seq)  # no acknowledged quote lost
    # The verifying subscriber (in AZ c) saw the same: no duplicate, gap or reordering.
    verdict = json.loads(sub_out.read_text())
    assert verdict["duplicates"] == 0, verdict
    assert verdict["out_of_order"] == 0, verdict
    assert verdict["gaps"] == 0, verdict
    silences = {n: verdict["instruments"][n]["max_silence_s"] for n in last_seq}
    print(f"longest silence per instrument across the AZ a cut: {silences}")
    print(f"subscriber's latency: {verdict['latency']}")
    print(f"longest gap per partition of prices: {_silences_on_prices(records, cut_ns)}")
    assert max(silences.values()) <= SILENCE_BOUND_S, silences
