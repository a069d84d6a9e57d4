"""Relay fail-over: how long ``prices`` stays silent on a crash, a SIGTERM hand-over and a join.

A cluster is an embedded broker of its own, started for it, with one pipeline
(:func:`_pipeline.start_pipeline`) on freshly created topics: publishing groups ``p1`` and
``p2`` (``--members`` each, default 1: the machine has 2 cores), relays ``r1`` and ``r2``, and
the synthetic feed (100 instruments x 10 Hz = 1,000 quotes/s) running throughout. A thread
follows ``prices`` and keeps, per partition, every record's timestamp (set by the relay's
producer) and its ``relay`` header. Each round, on a settled cluster (every partition led by
exactly one live relay, which wrote its latest record, under 5 s old; held for 1.5 s):

1. **kill**: SIGKILL the relay that wrote the latest records of the most partitions; per
   partition it had, the silence is the longest gap between consecutive record timestamps from
   1 s before the kill to 1 s after the first record written after it;
2. **join**: start a replacement relay; the longest gap on every partition from its start until
   the cluster settles again (cooperative hand-over of the partitions it is given);
3. **sigterm**: SIGTERM the relay that wrote the latest records of the most partitions (it
   hands over: keeps emitting until its successor asks, then releases); silence as in 1;
4. **join** again (a second replacement), as in 2.

Clusters: the rounds run in clusters of ``--rounds-per-cluster`` (default 1), each on a new
broker. The embedded broker (Tansu, memory storage) lists every record batch a partition has
ever held on every fetch (docs/architecture.md §7; ``bench/broker_fetch_cost.py``), so on one
broker each round runs on a broker slowed by the history of the rounds before it, and "0
records retained" is no longer true of late rounds. ``--rounds-per-cluster 0`` (or a value
>= ``--rounds``) runs every round on one broker, as this benchmark did before, so that the
history's effect can still be measured. Round numbers run on across the clusters of one
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

The reference for the silences is the feed's own tick (0.1 s per instrument): the goals are a
crash within S_relay + T_relay + 0.5 s at p99, hand-overs and joins within 2 ticks. At the end
of each cluster the feed stops and ``prices`` is judged exactly-once
(:func:`pricing_ha.local.verdict.judge`); every cluster must be.

Run (alone on the machine):
``.venv/bin/python bench/relay_takeover.py [--rounds 10] [--rounds-per-cluster 1]``
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Message, Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import TopicTail, summary, wait_until, write
from _pipeline import code_version, exactly_once, foreign_processes, start_feed, start_pipeline
from _standby_cost import STEADY_S, steady_costs

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.relay import relay_group_id
from pricing_ha.kafka.headers import header_dict
from pricing_ha.local.broker import EmbeddedBroker
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.demo_view import LiveView
from pricing_ha.local.procs import ProcessGroup

INSTRUMENTS = 100
TICK_S = 0.1  # the feed's interval per instrument (10 Hz)
_Rec = tuple[int, int, str]  # offset, timestamp ms, relay
FRESH_MS = 5000  # a partition's latest price must be this recent to count as flowing (under load)


def pct(values: list[float]) -> dict[str, float]:
    """n, p50, p99 (nearest rank), max and mean of ``values``."""
    if not values:
        return {"n": 0}
    s = sorted(values)
    rank = max(0, math.ceil(0.99 * len(s)) - 1)
    return {**summary(s), "p50": round(s[(len(s) - 1) // 2], 4), "p99": round(s[rank], 4)}


class PricesTail:
    """Follows ``prices`` from the beginning: per partition, (offset, timestamp ms, relay)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, skip: str) -> None:
        """Start following (records whose key starts with ``skip`` are the preload: ignored)."""
        self.records: dict[int, list[_Rec]] = {p: [] for p in range(partitions)}
        self._skip = skip.encode()
        self._tail = TopicTail(bootstrap, [topic], partitions, self._keep)

    def _keep(self, batch: list[Message], _received: float) -> None:
        for msg in batch:
            key = msg.key()
            if key is not None and key.startswith(self._skip):
                continue
            relay = header_dict(msg.headers()).get("relay", "")
            p, offset = msg.partition() or 0, msg.offset() or 0
            self.records[p].append((offset, msg.timestamp()[1], relay))

    def latest(self) -> dict[int, _Rec]:
        """The latest record of each partition that has one."""
        return {p: rs[-1] for p, rs in self.records.items() if rs}

    def close(self) -> None:
        """Stop following."""
        self._tail.close()


def _max_gap_ms(recs: list[_Rec], lo_ms: float, hi_ms: float) -> int:
    """Longest gap between consecutive records whose later one falls in [lo_ms, hi_ms]."""
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(recs) if lo_ms <= b[1] <= hi_ms]
    return max(gaps, default=0)


PRELOAD_PREFIX = "OLD"


def preload(bootstrap: str, topic: str, partitions: int, count: int) -> dict[str, float]:
    """Append ``count`` prices of 1,000 instruments foreign to the feed to ``topic``."""
    if count <= 0:
        return {"records": 0}
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 200000,
            "acks": "all",
            "log.connection.close": False,
        }
    )
    began = time.monotonic()
    value_pad = b"x" * 120
    for i in range(count):
        instrument = f"{PRELOAD_PREFIX}{i % 1000:04d}"
        seq = i // 1000 + 1
        while True:
            try:
                producer.produce(
                    topic,
                    key=instrument.encode(),
                    value=b'{"instrument":"%s","seq":%d,"pad":"%s"}'
                    % (instrument.encode(), seq, value_pad),
                    partition=i % partitions,
                    headers=[("seq", str(seq).encode()), ("relay", b"preload")],
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    took = time.monotonic() - began
    print(f"  preloaded {count} records in {took:.1f} s ({left} not acknowledged)", flush=True)
    return {"records": count, "seconds": round(took, 1), "not_acknowledged": left}


class Rounds:
    """The relays of one cluster, the live view of its leadership and the tail of prices."""

    def __init__(self, cluster: PricingCluster) -> None:
        """Follow the cluster's NELI topic and prices (relays r1 and r2 are running)."""
        self.c = cluster
        self.group_id = relay_group_id(cluster.group("relay"))
        # Leadership only (prices are followed below): from prices' end, so that a preloaded
        # million records does not hold the heartbeats back.
        self.view = LiveView(
            cluster.bootstrap,
            cluster.topics["neli"],
            cluster.topics["prices"],
            cluster.partitions,
            prices_from_end=True,
        )
        self.tail = PricesTail(
            cluster.bootstrap, cluster.topics["prices"], cluster.partitions, PRELOAD_PREFIX
        )
        self.live = {"r1", "r2"}
        self.started = 2
        self.diagnostic = ""

    def close(self) -> None:
        """Stop following."""
        self.view.close()
        self.tail.close()

    def _settled(self, balanced: bool) -> bool:
        leaders = self.view.leaders(self.group_id)
        latest = self.tail.latest()
        now_ms = time.time() * 1000
        owners = set()
        for p, members in leaders.items():
            if len(members) != 1 or members[0] not in self.live or p not in latest:
                return False
            _, ts, relay = latest[p]
            if now_ms - ts > FRESH_MS or relay != members[0]:
                return False
            owners.add(members[0])
        return owners == self.live or not balanced

    def settle(self) -> str | None:
        """Wait to settle (balanced within 30 s, else any owner); return how, None if never."""
        for balanced, timeout in ((True, 30.0), (False, 15.0)):
            if wait_until(lambda b=balanced: self._settled(b), timeout):  # type: ignore[misc]  # mypy cannot infer a lambda with a default
                time.sleep(1.5)
                if self._settled(balanced):
                    return "balanced" if balanced else "unbalanced"
        now_ms = time.time() * 1000
        latest = {
            p: (round((now_ms - ts) / 1000, 1), r) for p, (_, ts, r) in self.tail.latest().items()
        }
        self.diagnostic = (
            f"not settled: leaders {self.view.leaders(self.group_id)}, live {sorted(self.live)}, "
            f"latest record per partition (age s, relay) {latest}"
        )
        print(f"  {self.diagnostic}", flush=True)
        return None

    def stop_active(self, how: str) -> dict[str, Any] | None:
        """SIGKILL or SIGTERM (``how``) the active relay; its partitions' silence (None: stuck)."""
        c, tail = self.c, self.tail
        latest = tail.latest()
        by_relay: dict[str, list[int]] = {}
        for p, (_, _, relay) in sorted(latest.items()):
            by_relay.setdefault(relay, []).append(p)
        newest = max(latest.values(), key=lambda r: r[1])[2]
        victim = max(by_relay, key=lambda r: (len(by_relay[r]), r == newest))
        affected = by_relay[victim]
        row: dict[str, Any] = {
            "fault": how,
            "victim": victim,
            "affected_partitions": affected,
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        at_ms = time.time_ns() / 1e6
        row["at_ms"] = round(at_ms)  # to line the event up with any defect on prices
        proc = c.members[f"relay-{victim}"]
        if how == "kill":
            proc.kill()
        else:
            proc.terminate()
        self.live.discard(victim)

        def taken() -> bool:
            return all(
                any(r[2] != victim and r[1] > at_ms for r in tail.records[p]) for p in affected
            )

        if not wait_until(taken, 90):
            return None
        time.sleep(1.0)
        silence, first_s = {}, {}
        for p in affected:
            recs = list(tail.records[p])
            first = min((r for r in recs if r[2] != victim and r[1] > at_ms), key=lambda r: r[1])
            silence[p] = _max_gap_ms(recs, at_ms - 1000, first[1] + 1000) / 1000
            first_s[p] = round((first[1] - at_ms) / 1000, 3)
        row.update(silence_s=silence, to_first_record_of_successor_s=first_s)
        if how == "sigterm":
            row["exit_code"] = proc.wait(30)
        return row

    def join(self) -> dict[str, Any]:
        """Start a replacement relay and wait to settle; the gaps while it joins."""
        self.started += 1
        name = f"r{self.started}"
        join_ms = time.time_ns() / 1e6
        self.c.relay(name)
        self.live.add(name)
        how = self.settle()
        settled_ms = time.time_ns() / 1e6
        return {
            "fault": "join",
            "joined": name,
            "load_average_1m": round(os.getloadavg()[0], 2),
            "silence_s": {
                p: _max_gap_ms(list(self.tail.records[p]), join_ms, settled_ms) / 1000
                for p in range(self.c.partitions)
            },
            "at_ms": round(join_ms),
            "settled_after_s": round((settled_ms - join_ms) / 1000, 2),
            "settled_as": how,
        }

    def play(self, rounds: range, cluster: int) -> list[dict[str, Any]]:
        """The faults of ``rounds`` (on a settled cluster) until done or no longer settled."""
        rows: list[dict[str, Any]] = []
        for i in rounds:
            for fault in ("kill", "join", "sigterm", "join"):
                row = self.join() if fault == "join" else self.stop_active(fault)
                if row is None:
                    self.diagnostic = f"round {i} {fault}: not taken over within 90 s"
                    print(f"  {self.diagnostic}", flush=True)
                    return rows
                row["round"] = i
                row["cluster"] = cluster
                print(f"  round {i}: {row}", flush=True)
                rows.append(row)
                if row.get("settled_as", "n/a") is None:
                    print(f"  round {i}: the relays did not settle; ending the cluster", flush=True)
                    return rows
        return rows


BASELINE_S = 12.0  # the undisturbed window of a cluster that does not measure steady costs
BASELINE_SUB_S = 3.0  # about the window a sigterm or join silence is measured over


def baseline_gaps(recs: list[_Rec], lo_ms: float, hi_ms: float) -> list[float]:
    """The longest gap (s) in each whole consecutive 3 s sub-window of [lo_ms, hi_ms].

    A gap between consecutive records counts in the sub-window its later record falls in (as
    the silences do) and in every sub-window it spans without a record.
    """
    sub_ms = BASELINE_SUB_S * 1000
    n = int((hi_ms - lo_ms) // sub_ms)
    worst = [0] * n
    for a, b in itertools.pairwise(recs):
        k_a = math.floor((a[1] - lo_ms) / sub_ms)
        k_b = math.floor((b[1] - lo_ms) / sub_ms)
        for k in range(max(min(k_a + 1, k_b), 0), min(k_b + 1, n)):
            worst[k] = max(worst[k], b[1] - a[1])
    return [w / 1000 for w in worst]


@dataclass
class ClusterRun:
    """What one cluster (a broker of its own) measured."""

    summary: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    steady_costs: dict[str, Any] = field(default_factory=dict)
    baseline_gaps_s: list[float] = field(default_factory=list)
    verdict: dict[str, Any] | None = None  # None: not judged (the pipeline did not start)
    diagnostic: str | None = None


def fault_free_window(
    state: Rounds, result: ClusterRun, *, measure_costs: bool
) -> tuple[float, float]:
    """Leave the settled cluster without faults for a while (measuring the steady costs into
    ``result`` if ``measure_costs``, else :data:`BASELINE_S`); that window, in epoch ms."""
    c = state.c
    if measure_costs:
        result.steady_costs = steady_costs(
            c.bootstrap,
            c.topics["prices"],
            c.partitions,
            {r: c.members[f"relay-{r}"].pid for r in sorted(state.live)},
        )
        print(f"  steady costs: {result.steady_costs}", flush=True)
        result.summary["baseline_window"] = "the steady-cost window"
        measured = result.steady_costs["window_ms"]
        return measured["from"], measured["to"]
    lo_ms = time.time_ns() / 1e6
    time.sleep(BASELINE_S)  # undisturbed: no fault, no probe
    result.summary["baseline_window"] = "an undisturbed wait"
    return lo_ms, time.time_ns() / 1e6


def run_cluster(
    rounds: range,
    members: int,
    hz: float,
    retained: int,
    *,
    fencing: str,
    index: int,
    measure_costs: bool,
) -> ClusterRun:
    """``rounds`` (global numbers) on a new broker with fresh topics, ``retained`` preloaded."""
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="bench-relay-takeover-"))
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"cluster": index, "rounds": list(rounds)}
    result = ClusterRun(summary)
    with EmbeddedBroker() as broker, ProcessGroup(workdir / "logs") as procs:
        summary["broker_startup_s"] = round(broker.startup_s or 0.0, 2)
        c = PricingCluster(procs, broker.bootstrap, workdir)
        c.env["PRICING_HA__RELAY__FENCING"] = fencing
        c.create_topics()
        summary["preload"] = preload(broker.bootstrap, c.topics["prices"], c.partitions, retained)
        try:
            c = start_pipeline(procs, broker.bootstrap, workdir, members, cluster=c)
        except AssertionError as e:  # start_pipeline's (and wait_led's) timeouts
            result.diagnostic = f"the pipeline did not start: {e}"
            print(f"  {result.diagnostic}", flush=True)
            summary["wall_time_s"] = round(time.monotonic() - began, 1)
            return result
        state = Rounds(c)
        feed = start_feed(c, instruments=INSTRUMENTS, rate_hz=hz, duration_s=3600)
        window: tuple[float, float] | None = None  # the fault-free baseline window, epoch ms
        try:
            if state.settle() is not None:
                window = fault_free_window(state, result, measure_costs=measure_costs)
                rows = state.play(rounds, index)
        finally:
            feed.terminate()
            feed.wait(60)
            state.close()
        result.verdict = exactly_once(c, wait_s=60)  # time for the relays to catch up
    print(f"  exactly-once: {result.verdict}", flush=True)
    result.events = rows
    result.diagnostic = state.diagnostic or None
    if window is not None:
        result.baseline_gaps_s = [
            g for p in range(c.partitions) for g in baseline_gaps(state.tail.records[p], *window)
        ]
        summary["baseline_window_s"] = round((window[1] - window[0]) / 1000, 2)
        summary["baseline_worst_gap_s"] = pct(result.baseline_gaps_s)
        print(f"  baseline worst gap per 3 s: {summary['baseline_worst_gap_s']}", flush=True)
    summary["wall_time_s"] = round(time.monotonic() - began, 1)
    return result


_COUNTS = ("expected", "delivered", "duplicates", "missing", "out_of_order")


def run(
    rounds: int,
    per_cluster: int,
    members: int,
    hz: float,
    retained: int,
    *,
    fencing: str,
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
            fencing=fencing,
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

    def of(fault: str, worst: bool) -> dict[str, float]:
        picked = [r for r in rows if r["fault"] == fault]
        if worst:
            return pct([max(r["silence_s"].values()) for r in picked])
        return pct([s for r in picked for s in r["silence_s"].values()])

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
            for fault in ("kill", "sigterm", "join")
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
    parser.add_argument(
        "--fencing", choices=("none", "transactions"), default=AppConfig().relay.fencing
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
    goal_crash_s = (relay.session_timeout_ms + relay.threshold_ms) / 1000 + 0.5
    figures: dict[str, Any] = {
        "setup": {
            "broker": "embedded Tansu (memory storage), one process, a new one per cluster",
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
            "relay_fencing": args.fencing,
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
            args.rounds, per_cluster, args.members, args.hz, retained, fencing=args.fencing
        )
    figures["exactly_once_all"] = all(
        r["exactly_once"]["ok"] for r in figures["by_retained"].values()
    )
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    write("relay_takeover", figures, out)


if __name__ == "__main__":
    main()
