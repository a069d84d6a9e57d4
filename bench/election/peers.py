"""NELI beside ZooKeeper's and etcd's leader elections: takeover after SIGKILL, and idle cost.

One run on this machine, each peer against its own server started here on free 127.0.0.1 ports
(temporary data directories; no system service is used), three candidate processes each:

* **NELI** (``neli``, this repository) against a local Apache Kafka (one node), on a one-partition
  topic (one role: the election): full and fast variants, non-exclusive and exclusive modes;
* **ZooKeeper**: kazoo's ``Election`` recipe on a standalone ZooKeeper (Debian's ``zookeeper``);
* **etcd**: the recipe of etcd's ``concurrency.Election`` (what ``etcdctl elect`` runs) with
  python-etcd3 on a single-node etcd (Debian's ``etcd-server``).

Each at its default settings and at the smallest settings it takes:

========== ======================================== ==============================================
peer       default                                  smallest
========== ======================================== ==============================================
NELI       S = 3000 ms, T and pulse the library's   S = 1000 ms (pricing-ha's floor; the local
           defaults (T = 2S non-exclusive,          broker allows 500), T the library's default
           0.6(S - e) exclusive; pulse 300 ms)      for that S, pulse min(300, T/3)
ZooKeeper  tickTime 2000 ms, kazoo's 10 s session   tickTime 200 ms, 400 ms session (2 x tickTime;
                                                    tickTime 100 ms / 200 ms sessions expired about
                                                    once a second at idle here)
etcd       server defaults, lease TTL 60 s (the     lease TTL 1 s, which a server grants only with
           default of etcd's concurrency session)   --heartbeat-interval 50 --election-timeout 500
                                                    (with the defaults the least is 2 s)
========== ======================================== ==============================================

**Takeover.** Every candidate appends ``{"k": "lead", "t_ns": time.time_ns()}`` the moment it
believes it leads (``bench/election/member.py`` says what that means for each peer). A round
SIGKILLs the leader and measures, from ``time.time_ns()`` just before the kill, the time until
a survivor's first ``lead`` record; a replacement is then started and the election left to
settle (for NELI, the rebalance its joining causes). ``--rounds`` rounds per case;
``--long-rounds`` for cases whose takeover is expected above 20 s (etcd's default lease).

**Idle cost.** Once a case has elected its first leader and settled, a window of ``--idle-s``
seconds: CPU of each candidate and of the server, from ``/proc/PID/stat`` (utime + stime, all
threads; % of one core), and TCP segments (= packets on loopback) and bytes per second of each
candidate, from the kernel's per-socket counters (``ss -tinp``: ``segs_in + segs_out`` summed
over the process's sockets). No network namespace is needed for that. Any ``lost`` record
(a candidate that stopped believing it leads without being killed) is counted as ``spurious``.

Output: a table on stdout and ``bench/results/election_peers.json`` (``--out``): machine,
1-minute load average at start and end, git commit, per case the configuration, takeover
p50 / p99 / max / n (seconds), idle CPU per candidate and of the server, packets and bytes per
second per candidate, spurious losses; ratios against NELI at the same setting; and the
markdown table for the README (``markdown``).

Prerequisites, found or skipped with a message (``--install`` installs them):
Java and ``/usr/share/java/zookeeper.jar`` (``apt-get install zookeeper``: the jars without
``zookeeperd``'s system service), ``etcd`` (``apt-get install etcd-server``), and a venv with the
Python clients, not in the project's lock (python-etcd3's generated code needs protobuf 3)::

    V=.venv-bench-peers; .venv/bin/python -m venv $V && $V/bin/pip install kazoo etcd3 'protobuf<4'

Run (the first time with ``--install``; about 14 minutes at the defaults):
``.venv/bin/python -m bench.election [--install] [--rounds 5] [--long-rounds 3]
[--idle-s 10] [--peers neli,zookeeper,etcd] [--settings default,min] [--out PATH]``
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common.report import RESULTS, code_version, write
from bench.election.idle_cost import idle_cost
from bench.election.report import (
    believes_it_leads,
    markdown,
    ratios,
    records,
    table,
    takeover_summary,
)
from bench.election.servers import (
    PEERS_PYTHON,
    Server,
    etcd,
    install,
    kafka,
    missing_prerequisites,
    zookeeper,
)
from neli import Mode, NeliConfig, Variant
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.waiting import wait_until

MEMBER = "bench.election.member"  # run as a module, from the repository root
CANDIDATES = 3
LONG_S = 20.0  # cases expected to take over more slowly than this run --long-rounds rounds

NELI_CASES = [
    (Variant.FULL, Mode.NON_EXCLUSIVE),
    (Variant.FULL, Mode.EXCLUSIVE),
    (Variant.FAST, Mode.NON_EXCLUSIVE),
    (Variant.FAST, Mode.EXCLUSIVE),
]
#: NELI cases the others are compared with: the publishers' and the relay's configurations.


@dataclass(frozen=True)
class Case:
    """One peer at one setting."""

    peer: str  # neli | zookeeper | etcd
    label: str  # what runs: the NELI variant/mode, or the recipe
    setting: str  # default | min
    params: dict[str, Any]
    expected_s: float  # a rough takeover time, for timeouts and --long-rounds
    renewal_s: float  # how often a candidate renews its claim (pulse, ping, keep-alive)

    @property
    def key(self) -> str:
        """The case's name in the JSON."""
        return f"{self.peer} {self.label} @{self.setting}"


def neli_case(variant: Variant, mode: Mode, setting: str) -> Case:
    """A NELI case: the library's defaults, or S = 1000 ms with T its default for that S."""
    s = 3000 if setting == "default" else 1000
    probe = NeliConfig(
        bootstrap_servers="-", group_id="-", topic="-", variant=variant, mode=mode,
        session_timeout_ms=s, pulse_interval_ms=10,
    )  # fmt: skip
    t = probe.threshold_ms
    assert t is not None
    pulse = 300 if setting == "default" else min(300, t // 3 // 10 * 10)
    params = {
        "session_timeout_ms": s, "threshold_ms": t, "pulse_interval_ms": pulse,
        "clock_skew_ms": probe.clock_skew_ms, "partitions": 1,
    }  # fmt: skip
    label = f"{variant.value}/{mode.value}"
    return Case("neli", label, setting, params, (s + t) / 1000 + 2, pulse / 1000)


def all_cases(settings: list[str], peers: list[str]) -> list[Case]:
    """Every case asked for, NELI first."""
    cases: list[Case] = []
    for setting in settings:
        if "neli" in peers:
            cases += [neli_case(v, m, setting) for v, m in NELI_CASES]
        if "zookeeper" in peers:
            tick, session = (2000, 10_000) if setting == "default" else (200, 400)
            cases.append(
                Case(
                    "zookeeper", "kazoo Election", setting,
                    {"tick_time_ms": tick, "session_timeout_ms": session},
                    (session + tick) / 1000 + 1,
                    session / 3000,  # kazoo pings after a third of the session without traffic
                )
            )  # fmt: skip
        if "etcd" in peers:
            if setting == "default":
                params: dict[str, Any] = {"lease_ttl_s": 60, "server_flags": []}
            else:
                flags = ["--heartbeat-interval", "50", "--election-timeout", "500"]
                params = {"lease_ttl_s": 1, "server_flags": flags}
            ttl = params["lease_ttl_s"]
            cases.append(Case("etcd", "concurrency.Election", setting, params, ttl + 1, ttl / 3))
    order = {"neli": 0, "zookeeper": 1, "etcd": 2}
    return sorted(cases, key=lambda c: (order[c.peer], c.setting != "default"))


# --- one case -----------------------------------------------------------------------------------


class Candidates:
    """The candidate processes of one case, named c1, c2, ... in start order."""

    def __init__(self, case: Case, server: Server, procs: ProcessGroup, workdir: Path) -> None:
        """Prepare; nothing runs until :meth:`spawn`."""
        self.case, self.server, self.procs, self.workdir = case, server, procs, workdir
        self.live: dict[str, Proc] = {}
        self.started = 0
        self.tag = uuid.uuid4().hex[:8]
        if case.peer == "neli":
            admin = AdminClient({"bootstrap.servers": server.address})
            topic = f"bench-election-{self.tag}"
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)

    def path(self, name: str) -> Path:
        """The records file of candidate ``name``."""
        return self.workdir / f"{name}.jsonl"

    def spawn(self) -> str:
        """Start one more candidate; returns its name."""
        self.started += 1
        name = f"c{self.started}"
        c, p = self.case, self.case.params
        common = ["-m", MEMBER, c.peer, f"--out={self.path(name)}", f"--name={name}"]
        if c.peer == "neli":
            variant, mode = c.label.split("/")
            argv = [
                sys.executable, *common, f"--bootstrap={self.server.address}",
                f"--topic=bench-election-{self.tag}", f"--group=bench-election-{self.tag}",
                f"--variant={variant}", f"--mode={mode}",
                f"--session-ms={p['session_timeout_ms']}",
                f"--threshold-ms={p['threshold_ms']}", f"--pulse-ms={p['pulse_interval_ms']}",
            ]  # fmt: skip
        elif c.peer == "zookeeper":
            argv = [
                str(PEERS_PYTHON), *common, f"--hosts={self.server.address}",
                f"--session-ms={p['session_timeout_ms']}", f"--path=/bench/{self.tag}",
            ]  # fmt: skip
        else:
            argv = [
                str(PEERS_PYTHON), *common, f"--endpoint={self.server.address}",
                f"--ttl-s={p['lease_ttl_s']}", f"--prefix=/bench/{self.tag}",
            ]  # fmt: skip
        self.live[name] = self.procs.spawn(name, argv)
        return name

    def recs(self, name: str) -> list[dict[str, Any]]:
        """Records of ``name``."""
        return records(self.path(name))

    def ready(self, name: str) -> bool:
        """Whether ``name`` has connected."""
        return any(r["k"] == "ready" for r in self.recs(name))

    def all_ready(self) -> bool:
        """Every live candidate has connected."""
        return all(self.ready(n) for n in self.live)

    def leaders(self) -> list[str]:
        """The live candidates that believe they lead."""
        return [n for n in self.live if believes_it_leads(self.recs(n))]

    def first_lead_after(self, t_ns: int) -> int | None:
        """The earliest ``lead`` record of a live candidate at or after ``t_ns``."""
        times = [
            r["t_ns"]
            for n in self.live
            for r in self.recs(n)
            if r["k"] == "lead" and r["t_ns"] >= t_ns
        ]
        return min(times) if times else None

    def taken_over(self, t_ns: int) -> bool:
        """Whether a live candidate has led since ``t_ns``."""
        return self.first_lead_after(t_ns) is not None

    def spurious(self) -> int:
        """``lost`` records of every candidate ever started (killed ones write none)."""
        names = [f"c{i}" for i in range(1, self.started + 1)]
        return sum(1 for n in names for r in records(self.path(n)) if r["k"] == "lost")

    def diagnostics(self) -> str:
        """Log tails of the live candidates."""
        return "\n".join(f"--- {n}\n{p.log_tail(8)}" for n, p in self.live.items())


def settle_s(case: Case) -> float:
    """How long to let a case settle after a candidate joins (NELI: its rebalance)."""
    if case.peer == "neli":
        return float(case.params["session_timeout_ms"]) / 1000 + 2.5
    return 0.5


def run_case(
    case: Case, server: Server, rounds: int, idle_s: float, workdir: Path
) -> dict[str, Any]:
    """Start the candidates, measure the idle cost, then SIGKILL the leader ``rounds`` times."""
    result: dict[str, Any] = {"peer": case.peer, "label": case.label, "setting": case.setting}
    result["params"] = case.params
    timeout = 3 * case.expected_s + 30

    def one_leader(c: Candidates) -> bool:
        return c.all_ready() and len(c.leaders()) == 1

    with ProcessGroup(workdir / "logs") as procs:
        cands = Candidates(case, server, procs, workdir)
        for _ in range(CANDIDATES):
            cands.spawn()
        if not wait_until(lambda: one_leader(cands), timeout, poll_s=0.05):
            print(f"  no single leader elected\n{cands.diagnostics()}", flush=True)
            return {**result, "error": "no single leader elected", "takeover_s": {"n": 0}}
        time.sleep(settle_s(case))
        leader = (cands.leaders() or ["?"])[0]
        pids = {n: p.pid for n, p in cands.live.items()}
        # At least three renewals in the window, or the figures are mostly rounding.
        result["idle"] = idle_cost(pids, leader, server.pid, max(idle_s, 3 * case.renewal_s))
        takeovers: list[float] = []
        kills: list[dict[str, Any]] = []
        for i in range(rounds):
            if not wait_until(lambda: one_leader(cands), timeout, poll_s=0.02):
                print(f"  round {i}: no single leader; skipped", flush=True)
                continue
            victim = cands.leaders()[0]
            killed_ns = time.time_ns()
            cands.live.pop(victim).kill()
            kills.append({"victim": victim, "killed_ns": killed_ns})
            if not wait_until(functools.partial(cands.taken_over, killed_ns), timeout, 0.02):
                print(f"  round {i}: no takeover within {timeout:.0f} s", flush=True)
                print(cands.diagnostics(), flush=True)
                cands.spawn()
                continue
            took = ((cands.first_lead_after(killed_ns) or killed_ns) - killed_ns) / 1e9
            takeovers.append(took)
            print(f"  {case.key} round {i}: {took:.3f} s", flush=True)
            name = cands.spawn()
            wait_until(functools.partial(cands.ready, name), 60, 0.05)
            time.sleep(settle_s(case))
        result["takeover_s"] = takeover_summary(takeovers)
        result["takeovers_s"] = [round(t, 3) for t in takeovers]
        result["kills"] = kills
        result["workdir"] = str(workdir)
        result["spurious_losses"] = cands.spurious()
    return result


@contextlib.contextmanager
def server_for(case: Case, procs: ProcessGroup, workdir: Path) -> Iterator[Server]:
    """The server a case runs against, started for it alone."""
    if case.peer == "neli":
        with kafka(workdir) as server:
            yield server
    elif case.peer == "zookeeper":
        with zookeeper(procs, workdir, case.params["tick_time_ms"]) as server:
            yield server
    else:
        with etcd(procs, workdir, case.params["server_flags"]) as server:
            yield server


def main() -> None:
    """Run every case asked for and write bench/results/election_peers.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="SIGKILLs per case")
    parser.add_argument(
        "--long-rounds", type=int, default=3, help=f"rounds of cases slower than {LONG_S:.0f} s"
    )
    parser.add_argument("--idle-s", type=float, default=10.0, help="idle measurement window")
    parser.add_argument("--peers", default="neli,zookeeper,etcd")
    parser.add_argument("--settings", default="default,min")
    parser.add_argument("--install", action="store_true", help="apt-get and pip what is missing")
    parser.add_argument("--out", type=Path, default=RESULTS / "election_peers.json")
    args = parser.parse_args()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    if args.install:
        install()
    skipped = {p: why for p, why in missing_prerequisites().items() if p in peers}
    for peer, why in skipped.items():
        print(f"SKIPPED {peer}: {why}; run with --install to install it", flush=True)
    figures: dict[str, Any] = {
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "code": code_version(),
        "candidates": CANDIDATES,
        "rounds": args.rounds,
        "long_rounds": args.long_rounds,
        "idle_window_s": args.idle_s,
        "skipped": skipped,
    }
    results: dict[str, dict[str, Any]] = {}
    for case in all_cases(settings, [p for p in peers if p not in skipped]):
        rounds = args.rounds if case.expected_s <= LONG_S else min(args.rounds, args.long_rounds)
        print(f"{case.key}: {case.params}, {rounds} rounds", flush=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"bench-election-{case.peer}-"))
        try:
            with (
                ProcessGroup(workdir / "server-logs") as servers,
                server_for(case, servers, workdir) as server,
            ):
                results[case.key] = run_case(case, server, rounds, args.idle_s, workdir)
        except RuntimeError as exc:  # a server that would not start: say so, go on
            print(f"  {case.key} failed: {exc}", flush=True)
            results[case.key] = {
                "peer": case.peer, "label": case.label, "setting": case.setting,
                "params": case.params, "error": str(exc)[:2000], "takeover_s": {"n": 0},
            }  # fmt: skip
    rel = ratios(results)
    figures["cases"] = results
    figures["ratios_vs_neli"] = rel
    figures["markdown"] = markdown(results, rel)
    figures["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    print(table(results))
    print()
    print(figures["markdown"])
    write("election_peers", figures, path=args.out)


if __name__ == "__main__":
    main()
