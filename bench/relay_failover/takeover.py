"""Relay fail-over: how long ``prices`` stays silent when its relay crashes, stalls, hands over
or is joined, whether a stalled relay's late writes become visible, and whether a fault-free
cluster suffers takeovers nobody asked for.

A cluster is a local Apache Kafka of its own, started for it, with one pipeline
(:func:`bench.common.cluster.start_pipeline`) on freshly created topics: publishing groups ``p1``
and ``p2`` (``--members`` each, default 1: the machine has 2 cores), relays ``r1`` and ``r2``, and
the synthetic feed (100 instruments x 10 Hz = 1,000 prices/s) running throughout. The relays read
their timing from the ``[relay]`` section of the cluster's configuration file:
``session_timeout_ms`` S from ``--session-timeout-ms`` (default 6,000: Amazon MSK's default minimum
session), the standby detector's threshold D (``takeover_after_ms``) from ``--takeover-after-ms``
(default: the relay's own), and T = 600 ms, e = 200 ms, pulse 150 ms (the relay's defaults, which
keep T + e < S and pulse <= T / 4); all are in the JSON's ``setup``. A thread follows ``prices``
``read_committed`` (as subscribers read it) and keeps, per partition, every record's timestamp (set
by the relay's producer) and ``relay`` header, and every control record's kind and writer. Each
round, on a settled cluster (every partition led by exactly one live relay, which wrote its latest
record, under 5 s old; held for 1.5 s), the *active* relay being the one that wrote the latest
records of the most partitions:

1. **kill**: SIGKILL the active relay; per partition it had, the silence is the longest gap
   between consecutive record timestamps that ends after the kill and no later than 1 s after
   the first record another relay wrote after it;
2. **join**: start a replacement relay; the longest gap on every partition from its start until
   the cluster settles again (the relay group rebalances eagerly: each old owner hands over
   every partition, moved or given back to it, as in 4). Also reported from the rebalance the
   join causes (the first probe a new owner writes on ``prices``) until
   settled: the same, without the gaps of the new process's start-up, which here shares the 2
   cores with the whole pipeline;
3. **sigstop**: SIGSTOP the active relay for ``--stop-s`` (default 2 s: well past D, well
   below S), then SIGCONT. The silence as in 1, where the first
   record that ends it may also be the stopped relay's own once continued; and the silence
   from the SIGSTOP until the cluster settles after the SIGCONT (the stopped relay's return,
   and any hand-over back to it, are part of the fault: its goal holds this one). **Zombie
   records**: the stopped relay's prices that the reader sees, on a partition it had, after
   the first price another relay produced there after the SIGSTOP, and before any takeover
   marker of the stopped relay's own above it (a term of its own). Counted at the cluster's
   end, once the feed has stopped and ``prices`` is judged: they must be 0;
4. **sigterm**: SIGTERM the active relay (it hands over: keeps emitting until its successor
   asks, then releases); silence as in 1;
5. **join** again (a second replacement), as in 2.

Planned moves (sigterm, join) are also given in **feed ticks** (silence / the feed's interval
per instrument), worst partition per event.

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

Quiet window: with ``--quiet-s Q`` (default 0: none; the goal is 600), the first cluster of
each retained value that settles is then left fault-free for Q seconds at the same rate, and
every takeover control record produced on ``prices`` in that window is counted from outside:
with no fault, each is a **wrong suspicion** (whatever caused it).

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

Exactly once: at the end of each cluster the feed stops and ``prices``, read ``read_committed``, is
judged against the feed (:func:`pricing_ha.local.judging.judge`: duplicates, reorderings, seqs
missing) and counted from the topic alone (:func:`pricing_ha.local.tails.seq_defects`: duplicates,
reorderings, gaps); every cluster must be clean.

Goals: the JSON's top-level ``goals`` (:mod:`bench.relay_failover.goals`) holds each goal of the
relay's takeover against the figures of every retained value together: SIGKILL silence <= 0.6 s at
p99; SIGSTOP silence <= 0.6 s at p99 and no zombie record; SIGTERM and join <= 2 ticks at the
maximum; no wrong suspicion in the quiet window; every cluster exactly once. With the machine, the
load average and the commit, and whether the run was the one the goals describe (10 rounds, 0 and
1,000,000 retained, S = 6,000 ms, 1,000 prices/s, a 600 s quiet window).

Run (alone on the machine):
``.venv/bin/python -m bench.relay_failover [--rounds 10] [--quiet-s 600]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.report import code_version, foreign_processes, machine, write
from bench.common.topic_gaps import BASELINE_SUB_S
from bench.relay_failover.cluster import BASELINE_S, ClusterRun, Plan, run_cluster
from bench.relay_failover.goals import SESSION_MS, as_specified, goals
from bench.relay_failover.report import summarise
from bench.relay_failover.rounds import FAULTS, INSTRUMENTS, TICK_S
from bench.relay_failover.standby_cost import STEADY_S
from pricing_ha.config import AppConfig
from pricing_ha.local.cluster import PricingCluster


def run(rounds: int, per_cluster: int, plan: Plan, *, quiet_s: float) -> dict[str, Any]:
    """The rounds with ``plan.retained`` records preloaded, ``per_cluster`` rounds per new
    broker; the quiet window (``quiet_s`` > 0) in the first cluster that settles."""
    runs: list[ClusterRun] = []
    costs: dict[str, Any] = {}
    for index, first in enumerate(range(0, max(rounds, 1), per_cluster)):
        planned = range(first, min(first + per_cluster, rounds))
        print(f" cluster {index}: rounds {list(planned)}", flush=True)
        quiet_done = any(r.quiet is not None for r in runs)
        done = run_cluster(
            planned,
            plan,
            index=index,
            measure_costs=not costs,
            quiet_s=0.0 if quiet_done else quiet_s,
        )
        runs.append(done)
        if done.steady_costs:
            costs = {
                **done.steady_costs,
                "cluster": index,
                "note": "measured in the first cluster that settled only: each cluster is a "
                "fresh broker with the same preload, so it is the same in every cluster",
            }
    figures = summarise(runs, tick_s=1 / plan.hz, faults=plan.faults)
    figures["steady_costs"] = costs
    for row in figures["events"]:
        row["retained"] = plan.retained
    print(f" baseline worst gap per partition per 3 s: {figures['baseline_worst_gap_s']}")
    print(f" hop (relay's produce -> this reader): {figures['hop_s']}", flush=True)
    return figures


def main() -> None:
    """Run the rounds; write bench/results/relay_takeover.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--rounds-per-cluster",
        type=int,
        default=1,
        help="rounds per new broker (0: all rounds on one broker)",
    )
    parser.add_argument("--members", type=int, default=1, help="publishers per group")
    parser.add_argument("--hz", type=float, default=1 / TICK_S, help="per instrument (10)")
    parser.add_argument(
        "--retained", default="0,1000000", help="records preloaded on prices (of each cluster)"
    )
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=SESSION_MS,
        help="S of the relay group (6000: MSK's default minimum)",
    )
    parser.add_argument(
        "--takeover-after-ms",
        type=int,
        default=None,
        help="D of the relays' standby detector (default: the relay's own; 0: off)",
    )
    parser.add_argument("--stop-s", type=float, default=2.0, help="how long a SIGSTOP lasts")
    parser.add_argument(
        "--quiet-s", type=float, default=0.0, help="fault-free window counting takeovers (0: none)"
    )
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help="the faults of one round, in order (of kill, join, sigstop, sigterm; default: "
        "%(default)s); e.g. sigterm,join for planned moves alone",
    )
    parser.add_argument("--out", type=Path, default=None, help="write here instead")
    args = parser.parse_args()
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    if not faults or not set(faults) <= set(FAULTS):
        parser.error(f"--faults: a comma-separated list of {sorted(set(FAULTS))}")
    per_cluster = args.rounds_per_cluster
    if per_cluster <= 0 or per_cluster >= args.rounds:
        per_cluster = max(args.rounds, 1)  # every round on one broker
    # SIGTERM unwinds (stopping every process started) instead of killing this process alone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # The relay's own T, e and pulse at the chosen S: validated as any configuration is.
    relay = dataclasses.replace(
        AppConfig().relay,
        session_timeout_ms=args.session_timeout_ms,
        takeover_after_ms=args.takeover_after_ms,
    )
    # D as the relays apply it, written out so that the file and the JSON say the same
    detect = round(relay.takeover_after_s * 1000)
    relay = dataclasses.replace(relay, takeover_after_ms=detect)
    retained_values = [int(r) for r in args.retained.split(",")]
    began = time.monotonic()
    load_at_start = round(os.getloadavg()[0], 2)
    code = code_version()
    figures: dict[str, Any] = {
        "setup": {
            "broker": "local Apache Kafka (KRaft, one node, log on disk), a new one per cluster",
            "rounds": args.rounds,
            "rounds_per_cluster": per_cluster,
            "faults_per_round": list(faults),
            "publishers_per_group": args.members,
            "groups": ["p1", "p2"],
            "relays": "2 live (a replacement joins after each kill and each SIGTERM)",
            "partitions": PricingCluster.__dataclass_fields__["partitions"].default,
            "feed": f"{INSTRUMENTS} instruments x {args.hz:g} Hz",
            "prices_per_s": round(INSTRUMENTS * args.hz, 1),
            "feed_tick_s": round(1 / args.hz, 3),
            "neli_session_ms": PricingCluster.__dataclass_fields__["session_ms"].default,
            "relay_session_ms": relay.session_timeout_ms,
            "relay_threshold_ms": relay.threshold_ms,
            "relay_clock_skew_ms": relay.clock_skew_ms,
            "relay_pulse_interval_ms": relay.pulse_interval_ms,
            "relay_output_timeout_ms": relay.output_timeout_ms,
            "relay_fencing": "transactions",  # the only mode (kept for comparing results)
            "relay_takeover_after_ms": relay.takeover_after_ms,
            "sigstop_s": args.stop_s,
            "quiet_window_s": args.quiet_s,
            "baseline": {
                "window_s": f"the steady-cost window ({STEADY_S:g} s) where it is measured, "
                f"else {BASELINE_S:g} s undisturbed",
                "sub_window_s": BASELINE_SUB_S,
            },
            "note": "all processes share the machine's 2 cores",
            "code": code,
            "load_average_1m_at_start": load_at_start,
            "foreign_processes_at_start": foreign_processes(),
        },
        "by_retained": {},
    }
    # Child processes write relative paths (e.g. telemetry traces) here, not in the repository;
    # a relative --out still names a path from where the benchmark was started.
    out = None if args.out is None else Path(args.out).resolve()
    os.chdir(tempfile.mkdtemp(prefix="bench-relay-takeover-cwd-"))
    for retained in retained_values:
        print(f"{retained} records retained on prices", flush=True)
        plan = Plan(args.members, args.hz, retained, relay, args.stop_s, faults)
        figures["by_retained"][str(retained)] = run(
            args.rounds, per_cluster, plan, quiet_s=args.quiet_s
        )
    every = list(figures["by_retained"].values())
    figures["exactly_once_all"] = all(r["exactly_once"]["ok"] for r in every)
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    measured = goals(
        [e for r in every for e in r["events"]],
        [q for r in every for q in r["quiet"] or []],
        [v for r in every for v in r["exactly_once_per_cluster"]],
        tick_s=1 / args.hz,
    )
    head = {
        "goals": {
            **measured,
            "all_met": all(g["met"] for g in measured.values()),
            "as_specified": as_specified(
                rounds=args.rounds,
                retained=retained_values,
                session_ms=relay.session_timeout_ms,
                prices_per_s=INSTRUMENTS * args.hz,
                quiet_s=args.quiet_s,
                faults=faults,
            ),
            "machine": machine(),
            "load_average_1m": {"start": load_at_start, "end": round(os.getloadavg()[0], 2)},
            "code": code,
        }
    }
    write("relay_takeover", figures, out, head=head)


if __name__ == "__main__":
    main()
