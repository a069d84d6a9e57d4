"""One cluster of the relay takeover benchmark: its broker, pipeline, fault-free windows, verdict.

:func:`run_cluster` starts a local Apache Kafka of its own, writes the relays' ``[relay]`` section
into the cluster's configuration file, preloads ``prices`` (:func:`preload`), starts the pipeline
and the feed, waits for the relays to settle, leaves a fault-free window (the baseline, and the
steady costs in the first cluster), optionally a quiet window counting takeovers
(:func:`quiet_window`), plays the rounds' faults (:class:`bench.relay_failover.rounds.Rounds`) and
judges ``prices`` exactly once.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.common.cluster import start_feed, start_pipeline
from bench.common.topic_gaps import baseline_gaps, max_gap_ms
from bench.relay_failover.checks import relay_section, takeovers_in
from bench.relay_failover.rounds import FAULTS, INSTRUMENTS, PRELOAD_PREFIX, Rounds, pct
from bench.relay_failover.standby_cost import steady_costs
from pricing_ha.config import RelayConfig
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.tails import exactly_once


@dataclass(frozen=True)
class Plan:
    """What every cluster of one retained value runs with.

    Attributes:
        members: publishers per group.
        hz: the feed's rate per instrument.
        retained: records preloaded on ``prices``.
        relay: the relays' configuration (its ``[relay]`` section).
        stop_s: how long a SIGSTOP lasts.
        faults: the faults of one round, in order (:data:`~.rounds.FAULTS` by default).
    """

    members: int
    hz: float
    retained: int
    relay: RelayConfig
    stop_s: float
    faults: tuple[str, ...] = FAULTS


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


BASELINE_S = 12.0  # the undisturbed window of a cluster that does not measure steady costs


@dataclass
class ClusterRun:
    """What one cluster (a broker of its own) measured."""

    summary: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    steady_costs: dict[str, Any] = field(default_factory=dict)
    baseline_gaps_s: list[float] = field(default_factory=list)
    hops_ms: list[float] = field(default_factory=list)  # in the baseline window
    verdict: dict[str, Any] | None = None  # None: not judged (the pipeline did not start)
    diagnostic: str | None = None
    quiet: dict[str, Any] | None = None  # the quiet window's takeovers (None: no window)


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
    rounds: range, plan: Plan, *, index: int, measure_costs: bool, quiet_s: float = 0.0
) -> ClusterRun:
    """``rounds`` (global numbers) on a new broker with fresh topics, ``plan.retained``
    preloaded; a quiet window of ``quiet_s`` (if > 0) before the first fault."""
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="bench-relay-takeover-"))
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"cluster": index, "rounds": list(rounds)}
    result = ClusterRun(summary)
    with LocalKafka() as broker, ProcessGroup(workdir / "logs") as procs:
        summary["broker_startup_s"] = round(broker.startup_s or 0.0, 2)
        c = PricingCluster(procs, broker.bootstrap, workdir)
        with c.config_path.open("a") as f:  # the relays read [relay] like any deployment
            f.write("\n" + relay_section(plan.relay))
        c.create_topics()
        summary["preload"] = preload(
            broker.bootstrap, c.topics["prices"], c.partitions, plan.retained
        )
        try:
            c = start_pipeline(procs, broker.bootstrap, workdir, plan.members, cluster=c)
        except AssertionError as e:  # start_pipeline's (and wait_led's) timeouts
            result.diagnostic = f"the pipeline did not start: {e}"
            print(f"  {result.diagnostic}", flush=True)
            summary["wall_time_s"] = round(time.monotonic() - began, 1)
            return result
        state = Rounds(c, stop_s=plan.stop_s)
        feed = start_feed(c, instruments=INSTRUMENTS, rate_hz=plan.hz, duration_s=7200)
        window: tuple[float, float] | None = None  # the fault-free baseline window, epoch ms
        try:
            try:
                if state.settle() is not None:
                    window = fault_free_window(state, result, measure_costs=measure_costs)
                    if quiet_s > 0:
                        result.quiet = quiet_window(state, quiet_s)
                        if state.settle() is None:
                            rounds = range(0)  # not settled after the quiet window: no fault
                    rows = state.play(rounds, index, plan.faults)
            finally:
                feed.terminate()
                feed.wait(60)
            result.verdict = exactly_once(c, wait_s=60)  # time for the relays to catch up
            for row in rows:  # a zombie's late records may have become visible since
                if row["fault"] == "sigstop":
                    row["zombie_records"] = state.zombies(row)
        finally:
            state.close()
    print(f"  exactly-once: {result.verdict}", flush=True)
    result.events = rows
    result.diagnostic = state.diagnostic or None
    if window is not None:
        _baseline(result, state, *window)
    summary["wall_time_s"] = round(time.monotonic() - began, 1)
    return result


def _baseline(result: ClusterRun, state: Rounds, lo_ms: float, hi_ms: float) -> None:
    """The fault-free window's gaps and hops, into ``result``."""
    tail = state.tail
    result.baseline_gaps_s = [
        g for p in range(state.c.partitions) for g in baseline_gaps(tail.records[p], lo_ms, hi_ms)
    ]
    result.hops_ms = tail.hops_ms(lo_ms, hi_ms)
    summary = result.summary
    summary["hop_s"] = pct([h / 1000 for h in result.hops_ms])
    summary["baseline_window_s"] = round((hi_ms - lo_ms) / 1000, 2)
    summary["baseline_worst_gap_s"] = pct(result.baseline_gaps_s)
    print(f"  baseline worst gap per 3 s: {summary['baseline_worst_gap_s']}", flush=True)


def quiet_window(state: Rounds, quiet_s: float) -> dict[str, Any]:
    """Leave the settled cluster without faults for ``quiet_s`` and count, from ``prices``,
    the takeovers in that window: with no fault, each one is a wrong suspicion.

    A takeover is a takeover control record produced in the window (whoever wrote it, for
    whatever reason: a detector's suspicion, or a rebalance nobody asked for).
    """
    lo_ms = time.time_ns() / 1e6
    end = time.monotonic() + quiet_s
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(60.0, left))  # undisturbed: no fault, no probe
        done = quiet_s - max(0.0, end - time.monotonic())
        print(f"  quiet window: {done:.0f} of {quiet_s:g} s", flush=True)
    hi_ms = time.time_ns() / 1e6
    tail = state.tail
    controls = [c for p in range(state.c.partitions) for c in list(tail.controls[p])]
    found = takeovers_in(controls, lo_ms, hi_ms)
    kinds = Counter(kind for _, ts, _, kind in controls if lo_ms <= ts <= hi_ms)
    out = {
        "window_s": round((hi_ms - lo_ms) / 1000, 1),
        "wrong_suspicions": len(found),
        "takeovers": [{"offset": o, "at_ms": ts, "relay": r} for o, ts, r, _ in found],
        "control_records_by_kind": dict(sorted(kinds.items())),
        "worst_gap_s": {
            p: max_gap_ms(list(tail.records[p]), lo_ms, hi_ms) / 1000
            for p in range(state.c.partitions)
        },
        "relays_alive_at_end": sorted(
            r for r in state.live if state.c.members[f"relay-{r}"].alive()
        ),
    }
    print(f"  quiet window: {out}", flush=True)
    return out
