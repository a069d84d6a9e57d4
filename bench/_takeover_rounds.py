"""One cluster of ``relay_takeover.py``: its broker, pipeline, faults and measurements.

:func:`run_cluster` starts a local Apache Kafka of its own, preloads ``prices``
(:func:`preload`), starts the pipeline and the feed, waits for the relays to settle, leaves a
fault-free window (the baseline, and the steady costs in the first cluster), plays the rounds'
faults (:class:`Rounds`) and judges ``prices`` exactly once. What it reads back and how it
measures a silence: :mod:`_topic_gaps`.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import summary, wait_until
from _pipeline import exactly_once, start_feed, start_pipeline
from _standby_cost import steady_costs
from _topic_gaps import (
    InputTail,
    PricesTail,
    baseline_gaps,
    handover_gap_ms,
    max_gap_ms,
    worst_gap_at_ms,
)
from confluent_kafka import Producer

from pricing_ha.dedupe.relay import relay_group_id
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.demo_view import LiveView
from pricing_ha.local.procs import ProcessGroup

INSTRUMENTS = 100
TICK_S = 0.1  # the feed's interval per instrument (10 Hz)
FRESH_MS = 5000  # a partition's latest price must be this recent to count as flowing (under load)


def pct(values: list[float]) -> dict[str, float]:
    """n, p50, p99 (nearest rank), max and mean of ``values``."""
    if not values:
        return {"n": 0}
    s = sorted(values)
    rank = max(0, math.ceil(0.99 * len(s)) - 1)
    return {**summary(s), "p50": round(s[(len(s) - 1) // 2], 4), "p99": round(s[rank], 4)}


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
        self.input = InputTail(cluster.bootstrap, cluster.topics["raw"], cluster.partitions)
        self.live = {"r1", "r2"}
        self.started = 2
        self.diagnostic = ""

    def close(self) -> None:
        """Stop following."""
        self.view.close()
        self.tail.close()
        self.input.close()

    def silence_s(self, partitions: Iterable[int], lo_ms: float, hi_ms: float) -> dict[int, float]:
        """Per partition, the longest gap on ``prices`` in the window (:func:`max_gap_ms`)."""
        return {p: max_gap_ms(list(self.tail.records[p]), lo_ms, hi_ms) / 1000 for p in partitions}

    def input_silence_s(
        self, partitions: Iterable[int], lo_ms: float, hi_ms: float
    ) -> dict[int, float]:
        """Per partition, the relay's input's own longest gap in the window (:class:`InputTail`)."""
        return {p: self.input.silence_ms(p, lo_ms, hi_ms) / 1000 for p in partitions}

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
        silence, first_s, moved, where, upstream = {}, {}, {}, {}, {}
        for p in affected:
            recs = list(tail.records[p])
            first = min((r for r in recs if r[2] != victim and r[1] > at_ms), key=lambda r: r[1])
            # Gaps that end after the signal: one that ended before it is not its doing (it
            # was the join just before, which settled a moment earlier, or the machine).
            silence[p] = max_gap_ms(recs, at_ms, first[1] + 1000) / 1000
            upstream[p] = self.input.silence_ms(p, at_ms, first[1] + 1000) / 1000
            where[p] = worst_gap_at_ms(recs, at_ms, first[1] + 1000)
            first_s[p] = round((first[1] - at_ms) / 1000, 3)
            gap = handover_gap_ms(recs, at_ms, first[1] + 1000)
            if gap is not None:
                moved[p] = gap / 1000
        row.update(
            silence_s=silence,
            input_silence_s=upstream,
            to_first_record_of_successor_s=first_s,
            handover_gap_s=moved,
            worst_gap_at_ms=where,
        )
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
        # The join reaches the price path when the group rebalances: the new owners probe the
        # partitions it gives them. Before that, only the new process's start-up
        # shares the machine's 2 cores with the pipeline (on its own host it would not).
        entered_ms = self.tail.first_probe_ms(join_ms, settled_ms)
        moved = {
            p: gap / 1000
            for p in range(self.c.partitions)
            if (gap := handover_gap_ms(list(self.tail.records[p]), join_ms, settled_ms)) is not None
        }
        everything = range(self.c.partitions)
        return {
            "fault": "join",
            "joined": name,
            "load_average_1m": round(os.getloadavg()[0], 2),
            "silence_s": self.silence_s(everything, join_ms, settled_ms),
            "handover_gap_s": moved,
            "worst_gap_at_ms": {
                p: worst_gap_at_ms(list(self.tail.records[p]), join_ms, settled_ms)
                for p in everything
            },
            "at_ms": round(join_ms),
            "rebalance_after_s": (
                None if entered_ms is None else round((entered_ms - join_ms) / 1000, 3)
            ),
            "silence_from_rebalance_s": (
                None if entered_ms is None else self.silence_s(everything, entered_ms, settled_ms)
            ),
            "input_silence_s": self.input_silence_s(everything, join_ms, settled_ms),
            "input_silence_from_rebalance_s": (
                None
                if entered_ms is None
                else self.input_silence_s(everything, entered_ms, settled_ms)
            ),
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
    index: int,
    measure_costs: bool,
) -> ClusterRun:
    """``rounds`` (global numbers) on a new broker with fresh topics, ``retained`` preloaded."""
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="bench-relay-takeover-"))
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"cluster": index, "rounds": list(rounds)}
    result = ClusterRun(summary)
    with LocalKafka() as broker, ProcessGroup(workdir / "logs") as procs:
        summary["broker_startup_s"] = round(broker.startup_s or 0.0, 2)
        c = PricingCluster(procs, broker.bootstrap, workdir)
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
        result.hops_ms = state.tail.hops_ms(*window)
        summary["hop_s"] = pct([h / 1000 for h in result.hops_ms])
        summary["baseline_window_s"] = round((window[1] - window[0]) / 1000, 2)
        summary["baseline_worst_gap_s"] = pct(result.baseline_gaps_s)
        print(f"  baseline worst gap per 3 s: {summary['baseline_worst_gap_s']}", flush=True)
    summary["wall_time_s"] = round(time.monotonic() - began, 1)
    return result
