"""Broker faults: do prices keep flowing, exactly once, when the Kafka cluster itself fails?

Each fault kind runs on a cluster of its own: a local Apache Kafka of three KRaft nodes
(racks a/b/c; every topic at replication factor 3, ``min.insync.replicas`` 2), publishing
groups ``p1`` (AZ a) and ``p2`` (AZ b), relays ``r1`` (AZ a) and ``r2`` (AZ b), and the feed at
100 instruments x 10 Hz = 1,000 prices/s throughout; beside them the reference probe
(:class:`bench.broker.fault_rounds.Probe`: a plain ``acks=all`` producer and a ``read_committed``
consumer on a replicated topic of its own). ``--rounds`` rounds (default 5) of the fault, each
from a whole cluster (every partition with 3 replicas in sync, every group leading, prices and
the probe flowing):

* ``kill-leader``: SIGKILL the broker leading the most partitions of ``prices``; restart it
  ``--down-s`` later (default 10 s) from its own log directory;
* ``kill-coordinator``: SIGKILL the broker coordinating the most of the publishing groups'
  consumer groups (both NELI groups and both quote-position groups: the common-mode fault of
  P1 and P2); restart it ``--down-s`` later;
* ``sigstop``: SIGSTOP the broker leading the most of ``prices`` for
  ``replica.lag.time.max.ms`` + 2 s (it drops out of every ISR), then SIGCONT;
* ``rolling``: restart the three brokers one at a time, each with a controlled shutdown
  (SIGTERM), waiting for the full ISR before the next (as a managed patch does);
* ``az-a``: the AZ a outage of ``pricing-ha demo --nodes 3``: broker 1, P1's members and relay
  r1 frozen together (SIGSTOP) for ``--cut-s`` (default 20 s), then SIGCONT (why SIGSTOP and
  not SIGKILL: :mod:`pricing_ha.local.demo_faults`). Zombie records: r1's prices a reader sees
  after another relay's first price on a partition following the cut, before r1's own
  takeover marker (:func:`bench.relay_failover.checks.zombie_records`); they must be 0.

Per round: the longest silence on ``prices`` (any instrument: the wait between two new seqs'
*arrivals* at a ``read_committed`` reader, see :mod:`bench.broker.fault_rounds`) and on the probe
(any key), both over the same window, from the fault until the cluster is whole again. Per
cluster, once the feed has stopped: ``prices`` against the feed's acknowledged quotes (lost,
duplicates, out of order). Goals: the issue's (``goals`` in the JSON). Figures taken while other
work shares the machine are no results (``load_average_1m`` says how busy it was).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from bench.broker.fault_rounds import PricesArrivals, Probe, flowing, longest_silence
from bench.common.cluster import start_feed, start_pipeline
from bench.common.report import code_version, foreign_processes, machine, write
from bench.relay_failover.checks import zombie_records
from bench.relay_failover.goals import KILL_P99_S
from bench.relay_failover.rounds import pct
from pricing_ha.config import AppConfig, load_app_config
from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.broker_faults import (
    busiest_leader,
    coordinator_of,
    rolling_restart,
    wait_full_isr,
)
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.demo_faults import BrokerFaults, Zones
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.tails import exactly_once
from pricing_ha.local.waiting import wait_until
from pricing_ha.publishing.publisher import neli_group_id, quotes_group_id

FAULTS = ("kill-leader", "kill-coordinator", "sigstop", "rolling", "az-a")
INSTRUMENTS = 100
HZ = 10.0
MARGIN_S = 0.5  # the goal: silence <= the probe's + 0.5 s at p99
LAG_MS = 30_000  # Apache Kafka's replica.lag.time.max.ms (not overridden by LocalKafka)
#: The exactly-once verdict of a cluster that could not be judged (never "ok").
_UNJUDGED: dict[str, Any] = {"ok": False, "missing": 0, "duplicates": 0, "out_of_order": 0}
RESTART_TIMEOUT_S = 180.0  # a restarted node's first complete metadata answer (slow when busy)


class Cluster:
    """One three-node cluster with the whole pipeline, the tails and the probe on it."""

    def __init__(self, kafka: LocalKafka, procs: ProcessGroup, workdir: Path) -> None:
        """Create the topics, start the pipeline, the tails, the probe, then the feed."""
        self.kafka = kafka
        self.admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})
        c = PricingCluster(procs, kafka.bootstrap, workdir, replication_factor=3)
        c.create_topics()
        self.cluster = start_pipeline(procs, kafka.bootstrap, workdir, cluster=c)
        self.prices = PricesArrivals(kafka.bootstrap, c.topics["prices"], c.partitions)
        # The probe's producer has the pipeline's own client settings (its [broker] table):
        # the reference is the cluster's recovery as these clients see it.
        settings = load_app_config(c.config_path).broker.client_config()
        self.probe_settings = {k: v for k, v in settings.items() if not callable(v)}
        self.probe = Probe(
            kafka.bootstrap, f"probe-{uuid.uuid4().hex[:8]}", c.partitions, self.probe_settings
        )
        self.topics = [*c.topics.values(), self.probe.topic]
        self.faults = BrokerFaults(kafka, c.topics["prices"], c.members, Zones(), _no_note)
        self.feed = start_feed(c, instruments=INSTRUMENTS, rate_hz=HZ, duration_s=24 * 3600)

    def settle(self, timeout_s: float = 180.0) -> float:
        """Wait until the cluster is whole (full ISR, every group leading, both flowing)."""
        began = time.monotonic()
        wait_full_isr(self.admin, self.topics, timeout_s=timeout_s)
        self.cluster.wait_led(["p1", "p2", "relay"], timeout=timeout_s)
        if not wait_until(
            lambda: flowing(self.prices.arrivals, 1.0) and flowing(self.probe.arrivals, 1.0),
            timeout_s,
        ):
            now = time.monotonic()
            stale = sorted(k for k, a in self.prices.arrivals.items() if a and now - a[-1] > 1)
            quiet = sorted(k for k, a in self.probe.arrivals.items() if a and now - a[-1] > 1)
            raise AssertionError(
                f"not flowing again within {timeout_s:.0f} s: {len(stale)} instrument(s) on "
                f"prices ({', '.join(stale[:5])}...), probe keys {quiet}"
            )
        return time.monotonic() - began

    def close(self) -> dict[str, Any]:
        """Stop the feed, judge ``prices`` against it, stop the readers and the probe."""
        self.feed.terminate()
        try:
            self.feed.wait(60)
        except subprocess.TimeoutExpired:
            self.feed.kill()  # no summary then: the verdict below says the feed's file is missing
            self.feed.wait(10)
        try:
            verdict = exactly_once(self.cluster, wait_s=60)
        except (OSError, ValueError) as exc:  # no feed summary: nothing to judge against
            verdict = {**_UNJUDGED, "error": f"not judged: {exc}"}
        self.prices.close()
        self.probe.close()
        verdict["probe_delivery_failures"] = self.probe.failed
        return verdict


def _no_note(_text: str, **_where: str) -> None:
    """The faults' notes are the round's own record here."""


def _strike(fault: str, c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """Inject one fault and end it (restart, SIGCONT, heal); what was hit."""
    kafka, admin = c.kafka, c.admin
    prices = c.cluster.topics["prices"]
    if fault in ("kill-leader", "kill-coordinator"):
        if fault == "kill-leader":
            node, why = busiest_leader(admin, prices), {}
        else:
            groups = [
                f(c.cluster.group(g))
                for f in (neli_group_id, quotes_group_id)
                for g in ("p1", "p2")
            ]
            node, coordinated = coordinator_of(admin, groups)
            why = {"coordinated_groups": coordinated}
        kafka.node(node).kill()
        time.sleep(args.down_s)
        kafka.restart_node(node, timeout_s=RESTART_TIMEOUT_S)
        return {"broker": node, **why}
    if fault == "sigstop":
        node = busiest_leader(admin, prices)
        kafka.node(node).pause()
        time.sleep(args.stop_s)
        kafka.node(node).resume()
        return {"broker": node, "stopped_s": args.stop_s}
    if fault == "rolling":
        steps: list[str] = []
        rolling_restart(kafka, admin, c.topics, on_step=steps.append)
        return {"steps": steps}
    c.faults.lose_az_a()
    frozen = c.faults.frozen
    time.sleep(args.cut_s)
    c.faults.heal_az_a()
    return {"broker": 1, "frozen": frozen, "cut_s": args.cut_s}


def one_round(fault: str, c: Cluster, args: argparse.Namespace, n: int) -> dict[str, Any]:
    """A round: settle, strike, settle again; the silences over that window."""
    settled_before = c.settle()
    t0, wall_ms = time.monotonic(), time.time() * 1000
    hit = _strike(fault, c, args)
    ended = time.monotonic()
    recovery: float | None = None
    error = None
    try:
        recovery = c.settle()
    except (AssertionError, LocalKafkaError) as exc:  # measured anyway: open at the end
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    hi = time.monotonic()
    silence, instrument, still_open = longest_silence(c.prices.arrivals, t0, hi)
    probe, key, probe_open = longest_silence(c.probe.arrivals, t0, hi)
    out: dict[str, Any] = {
        "fault": fault,
        "round": n,
        **hit,
        "fault_s": round(ended - t0, 2),
        "settle_before_s": round(settled_before, 1),
        "until_whole_s": None if recovery is None else round(recovery, 1),
        "silence_s": silence,
        "worst_instrument": instrument,
        "probe_silence_s": probe,
        "probe_worst_key": key,
        "open_at_window_end": still_open or probe_open,
    }
    if error is not None:
        out["error"] = error
    if fault == "az-a":
        out["zombie_records"] = sum(
            zombie_records(c.prices.records[p], c.prices.controls[p], "r1", wall_ms)
            for p in c.prices.records
        )
    print(f"  {fault} round {n}: {out}", flush=True)
    return out


def run_fault(fault: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every round of one fault on a cluster of its own."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-broker-{fault}-"))
    rounds: list[dict[str, Any]] = []
    with (
        LocalKafka(nodes=3, workdir=workdir / "kafka") as kafka,
        ProcessGroup(workdir / "logs") as procs,
    ):
        try:
            c = Cluster(kafka, procs, workdir)
        except (AssertionError, LocalKafkaError) as exc:  # the other faults' clusters still run
            print(f"  {fault}: the cluster did not start: {exc}", flush=True)
            return {
                "rounds": [],
                "error": f"setting up: {type(exc).__name__}: {str(exc)[:300]}",
                "exactly_once": dict(_UNJUDGED),
                "workdir": str(workdir),
            }
        error = None
        try:
            for n in range(1, args.rounds + 1):
                rounds.append(one_round(fault, c, args, n))
                if "error" in rounds[-1]:
                    raise AssertionError(rounds[-1]["error"])
        except Exception as exc:  # noqa: BLE001 - the other faults' clusters still run
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            print(f"  {fault}: a round failed: {error}", flush=True)
        finally:
            verdict = c.close()
    return {
        "rounds": rounds,
        "error": error,
        "exactly_once": verdict,
        "probe_client_settings": {k: str(v) for k, v in c.probe_settings.items()},
        "workdir": str(workdir),
    }


def _p99(rounds: list[dict[str, Any]], key: str) -> float | None:
    return pct([r[key] for r in rounds if r.get(key) is not None]).get("p99")


def goals(by_fault: dict[str, dict[str, Any]], bound_s: float) -> dict[str, Any]:
    """The issue's goals against the measured figures (a goal with nothing measured: not met)."""
    out: dict[str, Any] = {}
    for fault, result in by_fault.items():
        rounds = result["rounds"]
        bound: float | None
        measured: float | None
        prices, probe = _p99(rounds, "silence_s"), _p99(rounds, "probe_silence_s")
        if fault == "rolling":
            worst = max((r["silence_s"] for r in rounds), default=None)
            text, bound = (
                "rolling restart: no instrument silent longer than the demo's bound",
                bound_s,
            )
            measured = worst
        elif fault == "az-a":
            text = "AZ a cut: silence <= the relay crash goal + the probe's, p99; no zombie"
            bound = None if probe is None else round(KILL_P99_S + probe, 3)
            measured = prices
        else:
            text = f"{fault}: silence on prices <= the probe's + {MARGIN_S} s, p99"
            bound = None if probe is None else round(probe + MARGIN_S, 3)
            measured = prices
        met = measured is not None and bound is not None and measured <= bound
        goal = {
            "goal": text,
            "bound_s": bound,
            "measured_s": measured,
            "probe_p99_s": probe,
            "n": len(rounds),
        }
        if fault == "az-a":
            zombies = sum(r.get("zombie_records", 0) for r in rounds)
            goal["zombie_records"] = zombies
            met = met and zombies == 0
        if result.get("error"):
            goal["error"] = result["error"]  # a round that did not finish: not met
            met = False
        out[fault] = {**goal, "met": met}
    verdicts = {f: r["exactly_once"] for f, r in by_fault.items()}
    out["exactly_once"] = {
        "goal": "0 acknowledged quotes lost, 0 duplicates, 0 out of order on prices, per cluster",
        **{
            k: sum(v[k] for v in verdicts.values())
            for k in ("missing", "duplicates", "out_of_order")
        },
        "met": bool(verdicts) and all(v["ok"] for v in verdicts.values()),
    }
    out["all_met"] = all(g["met"] for g in out.values() if isinstance(g, dict))
    return out


def main() -> None:
    """Parse arguments, run each fault's cluster, write bench/results/broker_faults.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per fault")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated subset")
    parser.add_argument("--down-s", type=float, default=10.0, help="a killed broker's downtime")
    parser.add_argument("--stop-s", type=float, default=LAG_MS / 1000 + 2, help="SIGSTOP length")
    parser.add_argument("--cut-s", type=float, default=20.0, help="the AZ a outage's length")
    parser.add_argument("--out", type=Path, default=None, help="write here instead")
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        parser.error(f"unknown fault(s) {unknown}; known: {', '.join(FAULTS)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, stopping what started
    reorder_s = AppConfig().relay.reorder_window_ms / 1000
    bound_s = round(2 / HZ + reorder_s, 3)
    load_at_start = round(os.getloadavg()[0], 2)
    code = code_version()
    out = None if args.out is None else Path(args.out).resolve()
    os.chdir(tempfile.mkdtemp(prefix="bench-broker-faults-cwd-"))  # children's relative paths
    began = time.monotonic()
    by_fault: dict[str, dict[str, Any]] = {}
    for fault in faults:
        print(f"{fault}: {args.rounds} round(s) on a new three-node cluster", flush=True)
        by_fault[fault] = run_fault(fault, args)
    figures: dict[str, Any] = {
        "setup": {
            "broker": "local Apache Kafka, 3 KRaft nodes (racks a/b/c), RF 3, min ISR 2; "
            "a new cluster per fault",
            "rounds": args.rounds,
            "faults": faults,
            "feed": f"{INSTRUMENTS} instruments x {HZ:g} Hz",
            "prices_per_s": INSTRUMENTS * HZ,
            "down_s": args.down_s,
            "sigstop_s": args.stop_s,
            "cut_s": args.cut_s,
            "demo_bound_s": bound_s,
            "probe": "acks=all idempotent producer with the pipeline's client settings, 8 keys "
            "x 25/s, read_committed consumer (settings: by_fault.*.probe_client_settings)",
            "code": code,
            "load_average_1m_at_start": load_at_start,
            "foreign_processes_at_start": foreign_processes(),
        },
        "by_fault": by_fault,
        "wall_time_s": round(time.monotonic() - began, 1),
    }
    head = {
        "goals": {
            **goals(by_fault, bound_s),
            "as_specified": args.rounds >= 5 and set(faults) == set(FAULTS),
            "machine": machine(),
            "load_average_1m": {"start": load_at_start, "end": round(os.getloadavg()[0], 2)},
            "code": code,
        }
    }
    smoke = None if args.rounds >= 5 else f"{args.rounds} round(s), the goals ask for 5"
    write("broker_faults", figures, out, head=head, smoke=smoke)


if __name__ == "__main__":
    main()
