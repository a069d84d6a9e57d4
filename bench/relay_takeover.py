"""Relay fail-over: how long ``prices`` stays silent on a crash, a SIGTERM hand-over and a join.

A cluster is a local Apache Kafka of its own, started for it, with one pipeline
(:func:`_pipeline.start_pipeline`) on freshly created topics: publishing groups ``p1`` and
``p2`` (``--members`` each, default 1: the machine has 2 cores), relays ``r1`` and ``r2``, and
the synthetic feed (100 instruments x 10 Hz = 1,000 quotes/s) running throughout. A thread
follows ``prices`` and keeps, per partition, every record's timestamp (set by the relay's
producer) and its ``relay`` header. Each round, on a settled cluster (every partition led by
exactly one live relay, which wrote its latest record, under 5 s old; held for 1.5 s):

1. **kill**: SIGKILL the relay that wrote the latest records of the most partitions; per
   partition it had, the silence is the longest gap between consecutive record timestamps
   that ends after the kill and no later than 1 s after the first record written after it
   (until 2026-11-28 gaps ending up to 1 s *before* the signal counted too, so a SIGTERM could
   be charged a gap of the join that had settled just before it);
2. **join**: start a replacement relay; the longest gap on every partition from its start until
   the cluster settles again (the relay group rebalances eagerly: each old owner hands over
   every partition, moved or given back to it, as in 3). Also
   reported from the rebalance the join causes (the first probe a new owner writes on
   ``prices``) until settled: the same, without the gaps of the new process's
   start-up, which here shares the 2 cores with the whole pipeline;
3. **sigterm**: SIGTERM the relay that wrote the latest records of the most partitions (it
   hands over: keeps emitting until its successor asks, then releases); silence as in 1;
4. **join** again (a second replacement), as in 2.

Clusters: the rounds run in clusters of ``--rounds-per-cluster`` (default 1), each on a new
broker, so that every round starts from the same state: on one broker, "0 records retained"
is no longer true of late rounds, which run on the history of the rounds before them.
``--rounds-per-cluster 0`` (or a value >= ``--rounds``) runs every round on one broker, so
that the history's effect can still be measured. Round numbers run on across the clusters of one
retained value; each event also names its cluster.

Retention: with ``--retained N`` (default: both 0 and 1,000,000) each cluster's ``prices`` is
first filled with N records of 1,000 other instruments (so they do not collide with the feed's
seqs), before the relays start; the takeover must not grow with it (the relays' standby tails
read it once, at start).

Also measured, over a 20 s steady window in the first cluster of each retained value that
settles (a fresh broker with the same preload: the same in every cluster): the CPU of each
relay process, and of a process running only the relay's standby tail
(:class:`pricing_ha.dedupe.standby.StandbyTail`) over ``prices``: the standby's cost per
record and per second.

Baseline: the relay's output on a partition normally has gaps of one feed tick, but under load
on 2 cores gaps of 0.2-0.3 s occur without any fault. So each cluster, once settled and before
its first fault, is left undisturbed for a window (the steady-cost window where that is
measured, else 12 s), and per partition the longest gap between consecutive record timestamps
is taken in each consecutive 3 s sub-window of it (3 s: about the window a sigterm or join
silence is measured over; a gap counts in the sub-window its later record falls in, and in
every sub-window it spans). Their distribution is reported beside the silences, not
subtracted from them.

Two more figures separate a move's own cost from that noise. The **hand-over gap** of a
partition that moved is the gap at the change of relay: from the last record of the one that
had it to the first record of the next (a silence is the longest gap of its window, wherever it
fell). The **hop** is the same run's one-broker-hop reference: per record of ``prices``, from its
producer timestamp (the relay's ``produce()``) to this benchmark's reader having it, over the
fault-free windows. A hand-over is a chain of such hops (the successor's request, the old
owner's flush and release, the successor's read of it, its first record), so its gap is
compared with the hop.

A third separates the relay from its input. A thread follows ``prices.raw`` too, from its end,
and keeps the producer timestamp of every copy either publishing group wrote there. Per event
and partition, the **input silence** is the longest gap between consecutive copies (both
groups' copies as one, by timestamp) in the same window as the silence on ``prices``: the
feed's, the publishers' and their broker hops' own gaps, and the machine's, which no relay can
hide. **Beyond input** is, per event, the most any partition's silence on ``prices`` exceeded
its input silence: what the relay added.

The reference for the silences is the feed's own tick (0.1 s per instrument): the goals are a
crash within S_relay + T_relay + 0.5 s at p99, hand-overs and joins within 2 ticks. At the end
of each cluster the feed stops and ``prices`` is judged exactly-once
(:func:`pricing_ha.local.verdict.judge`); every cluster must be.

Run (alone on the machine):
``.venv/bin/python bench/relay_takeover.py [--rounds 10] [--rounds-per-cluster 1]``
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write
from _pipeline import code_version, foreign_processes
from _standby_cost import STEADY_S
from _takeover_rounds import (
    BASELINE_S,
    INSTRUMENTS,
    TICK_S,
    ClusterRun,
    pct,
    run_cluster,
)
from _topic_gaps import BASELINE_SUB_S

from pricing_ha.config import AppConfig
from pricing_ha.local.cluster import PricingCluster

_COUNTS = ("expected", "delivered", "duplicates", "missing", "out_of_order")
_FAULTS = ("kill", "sigterm", "join")


def run(
    rounds: int,
    per_cluster: int,
    members: int,
    hz: float,
    retained: int,
) -> dict[str, Any]:
    """The rounds with ``retained`` records preloaded, ``per_cluster`` rounds per new broker."""
    runs: list[ClusterRun] = []
    costs: dict[str, Any] = {}
    for index, first in enumerate(range(0, max(rounds, 1), per_cluster)):
        planned = range(first, min(first + per_cluster, rounds))
        print(f" cluster {index}: rounds {list(planned)}", flush=True)
        done = run_cluster(
            planned,
            members,
            hz,
            retained,
            index=index,
            measure_costs=not costs,
        )
        runs.append(done)
        if done.steady_costs:
            costs = {
                **done.steady_costs,
                "cluster": index,
                "note": "measured in the first cluster that settled only: each cluster is a "
                "fresh broker with the same preload, so it is the same in every cluster",
            }
    rows = [e for r in runs for e in r.events]
    verdicts = [r.verdict for r in runs]
    judged = [v for v in verdicts if v is not None]
    gaps = [g for r in runs for g in r.baseline_gaps_s]
    baseline = pct(gaps)
    print(f" baseline worst gap per partition per 3 s, all clusters: {baseline}", flush=True)
    hops = pct([h / 1000 for r in runs for h in r.hops_ms])
    print(f" hop (relay's produce -> this reader), all clusters: {hops}", flush=True)

    def of(fault: str, worst: bool, key: str = "silence_s") -> dict[str, float]:
        picked = [r[key] for r in rows if r["fault"] == fault and r.get(key)]
        if worst:
            return pct([max(s.values()) for s in picked])
        return pct([v for s in picked for v in s.values()])

    def beyond(fault: str, key: str, reference: str) -> dict[str, float]:
        """Per event: the most any partition's silence exceeded its input's own gap."""
        worst = [
            max(r[key][p] - r[reference].get(p, 0.0) for p in r[key])
            for r in rows
            if r["fault"] == fault and r.get(key) and r.get(reference) is not None
        ]
        return pct([round(w, 4) for w in worst])

    faults_per_round: dict[int, int] = {}
    for r in rows:
        faults_per_round[r["round"]] = faults_per_round.get(r["round"], 0) + 1
    diagnostics = {str(r.summary["cluster"]): r.diagnostic for r in runs if r.diagnostic}
    loaded = [r.summary["preload"] for r in runs]
    return {
        "preload": {
            "records": retained,
            "into": "each cluster's prices",
            "seconds": max((p.get("seconds", 0.0) for p in loaded), default=0.0),
            "not_acknowledged": sum(p.get("not_acknowledged", 0) for p in loaded),
        },
        "clusters": len(runs),
        # rounds whose four faults were all made (in any cluster)
        "rounds_completed": sum(1 for n in faults_per_round.values() if n == 4),
        "silence_s": {
            fault: {"per_affected_partition": of(fault, False), "worst_per_event": of(fault, True)}
            for fault in _FAULTS
        },
        # The relay's input (both groups' copies on prices.raw, as one) in the same windows:
        # its own longest gap per event, and how far each silence on prices went beyond its
        # input's gap on the same partition (worst partition per event). What the relay adds.
        "input_silence_s": {
            **{fault: of(fault, True, "input_silence_s") for fault in _FAULTS},
            "join_from_rebalance": of("join", True, "input_silence_from_rebalance_s"),
        },
        "beyond_input_s": {
            **{fault: beyond(fault, "silence_s", "input_silence_s") for fault in _FAULTS},
            "join_from_rebalance": beyond(
                "join", "silence_from_rebalance_s", "input_silence_from_rebalance_s"
            ),
        },
        # a join's silence from the rebalance it causes (the first hand-over announcement)
        # until settled: the move without the new process's start-up on the same 2 cores
        "join_from_rebalance_silence_s": {
            "per_partition": of("join", False, "silence_from_rebalance_s"),
            "worst_per_event": of("join", True, "silence_from_rebalance_s"),
            "rebalance_after_start_s": pct(
                [r["rebalance_after_s"] for r in rows if r.get("rebalance_after_s") is not None]
            ),
        },
        # per moved partition: the gap at the change of relay (the move's own cost)
        "handover_gap_s": {
            fault: pct(
                [g for r in rows if r["fault"] == fault for g in r["handover_gap_s"].values()]
            )
            for fault in _FAULTS
        },
        "kill_to_successor_first_record_s": pct(
            [
                s
                for r in rows
                if r["fault"] == "kill"
                for s in r["to_first_record_of_successor_s"].values()
            ]
        ),
        # per partition and 3 s sub-window of each cluster's fault-free window: the longest gap
        "baseline_worst_gap_s": baseline,
        # the same run's one-hop reference: relay's produce() -> a reader of prices, in the
        # fault-free windows
        "hop_s": hops,
        "baseline_window_s": {
            "sub_window": BASELINE_SUB_S,
            "per_cluster": [r.summary.get("baseline_window_s") for r in runs],
        },
        "steady_costs": costs,
        # over all clusters: ok only if every cluster was judged and exactly once
        "exactly_once": {
            "ok": len(judged) == len(verdicts) and all(v["ok"] for v in judged),
            **{k: sum(v[k] for v in judged) for k in _COUNTS},
        },
        "exactly_once_per_cluster": verdicts,
        "stopped_because": diagnostics or None,
        "per_cluster": [r.summary for r in runs],
        "events": rows,
    }


def main() -> None:
    """Run the rounds; write bench/results/relay_takeover.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--rounds-per-cluster",
        type=int,
        default=1,
        help="rounds per new broker (0: all rounds on one broker, as before)",
    )
    parser.add_argument("--members", type=int, default=1, help="publishers per group")
    parser.add_argument("--hz", type=float, default=1 / TICK_S, help="per instrument (100)")
    parser.add_argument(
        "--retained", default="0,1000000", help="records preloaded on prices (of each cluster)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write here instead")
    args = parser.parse_args()
    per_cluster = args.rounds_per_cluster
    if per_cluster <= 0 or per_cluster >= args.rounds:
        per_cluster = max(args.rounds, 1)  # every round on one broker
    # SIGTERM unwinds (stopping every process started) instead of killing this process alone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    relay = AppConfig().relay
    began = time.monotonic()
    # The goal of a crash: detection (S) plus half a second, at p99 (the broker fences: a
    # takeover does not wait out the grace period T).
    goal_crash_s = relay.session_timeout_ms / 1000 + 0.5
    figures: dict[str, Any] = {
        "setup": {
            "broker": "local Apache Kafka (KRaft, one node, log on disk), a new one per cluster",
            "rounds": args.rounds,
            "rounds_per_cluster": per_cluster,
            "publishers_per_group": args.members,
            "groups": ["p1", "p2"],
            "relays": "2 live (a replacement joins after each kill and each SIGTERM)",
            "partitions": PricingCluster.__dataclass_fields__["partitions"].default,
            "feed": f"{INSTRUMENTS} instruments x {args.hz:g} Hz",
            "feed_tick_s": round(1 / args.hz, 3),
            "neli_session_ms": PricingCluster.__dataclass_fields__["session_ms"].default,
            "relay_session_ms": relay.session_timeout_ms,
            "relay_threshold_ms": relay.threshold_ms,
            "relay_clock_skew_ms": relay.clock_skew_ms,
            "relay_pulse_interval_ms": relay.pulse_interval_ms,
            "relay_fencing": "transactions",  # the only mode (kept for comparing results)
            "goals_s": {
                "kill_p99": goal_crash_s,
                "sigterm_and_join_max": round(2 / args.hz, 3),
            },
            "baseline": {
                "window_s": f"the steady-cost window ({STEADY_S:g} s) where it is measured, "
                f"else {BASELINE_S:g} s undisturbed",
                "sub_window_s": BASELINE_SUB_S,
            },
            "note": "all processes share the machine's 2 cores",
            "code": code_version(),
            "load_average_1m_at_start": round(os.getloadavg()[0], 2),
            "foreign_processes_at_start": foreign_processes(),
        },
        "by_retained": {},
    }
    # Child processes write relative paths (e.g. telemetry traces) here, not in the repository;
    # a relative --out still names a path from where the benchmark was started.
    out = None if args.out is None else Path(args.out).resolve()
    os.chdir(tempfile.mkdtemp(prefix="bench-relay-takeover-cwd-"))
    for retained in (int(r) for r in args.retained.split(",")):
        print(f"{retained} records retained on prices", flush=True)
        figures["by_retained"][str(retained)] = run(
            args.rounds, per_cluster, args.members, args.hz, retained
        )
    figures["exactly_once_all"] = all(
        r["exactly_once"]["ok"] for r in figures["by_retained"].values()
    )
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    write("relay_takeover", figures, out)


if __name__ == "__main__":
    main()
