"""The faults of the relay takeover benchmark's rounds, on one running cluster (:class:`Rounds`).

Each round is :data:`FAULTS`: SIGKILL of the active relay, a replacement joining, SIGSTOP of
the active relay for a while then SIGCONT, SIGTERM of the active relay, and another
replacement joining. The cluster around them (broker, pipeline, feed, fault-free windows,
verdict): :mod:`bench.relay_failover.cluster`. What it reads back and how it measures a silence:
:mod:`bench.common.topic_gaps`; what it judges from that: :mod:`bench.relay_failover.checks`.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from bench.common.report import summary
from bench.common.topic_gaps import (
    InputTail,
    PricesTail,
    Rec,
    handover_gap_ms,
    max_gap_ms,
    worst_gap_at_ms,
)
from bench.relay_failover.checks import zombie_records
from pricing_ha.dedupe.relay import relay_group_id
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.demo_view import LiveView
from pricing_ha.local.procs import Proc
from pricing_ha.local.waiting import wait_until

INSTRUMENTS = 100
TICK_S = 0.1  # the feed's interval per instrument (10 Hz)
FRESH_MS = 5000  # a partition's latest price must be this recent to count as flowing (under load)
FAULTS = ("kill", "join", "sigstop", "sigterm", "join")  # one round
PRELOAD_PREFIX = "OLD"  # the keys of the records preloaded on prices (not the feed's)


def pct(values: list[float]) -> dict[str, float]:
    """n, p50, p99 (nearest rank), max and mean of ``values``."""
    if not values:
        return {"n": 0}
    s = sorted(values)
    rank = max(0, math.ceil(0.99 * len(s)) - 1)
    return {**summary(s), "p50": round(s[(len(s) - 1) // 2], 4), "p99": round(s[rank], 4)}


class Rounds:
    """The relays of one cluster, the live view of its leadership and the tail of prices."""

    def __init__(self, cluster: PricingCluster, *, stop_s: float = 2.0) -> None:
        """Follow the cluster's NELI topic and prices (relays r1 and r2 are running);
        ``stop_s``: how long a SIGSTOP lasts."""
        self.c = cluster
        self.stop_s = stop_s
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

    def exited(self) -> dict[str, int | None]:
        """The relays meant to be live whose processes have exited, with their exit codes."""
        procs = {r: self.c.members[f"relay-{r}"] for r in sorted(self.live)}
        return {r: p.popen.returncode for r, p in procs.items() if not p.alive()}

    def control_kinds(self, lo_ms: float, hi_ms: float) -> dict[str, int]:
        """How many control records of each kind (takeover, release, handover, ...) were
        produced on ``prices`` in [lo_ms, hi_ms], over every partition: what the relays did."""
        kinds = Counter(
            kind
            for p in range(self.c.partitions)
            for _, ts, _, kind in list(self.tail.controls[p])
            if lo_ms <= ts <= hi_ms
        )
        return dict(sorted(kinds.items()))

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
        """SIGKILL, SIGTERM or SIGSTOP (``how``: ``kill``, ``sigterm``, ``sigstop``) the active
        relay (the one that wrote the latest records of the most partitions); its partitions'
        silence (None: not taken over, or for ``sigstop`` not resumed, within 90 s).

        A silence ends with the first record on the partition written after the signal by
        another relay or, after a SIGSTOP, by the stopped relay itself once continued. A
        SIGSTOP lasts :attr:`stop_s`; its row also measures until the cluster settles after
        the SIGCONT (``silence_until_settled_s``): the stopped relay's return, and any
        hand-over back to it, are part of the fault.
        """
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
        resumed_ms = self._signal(proc, how, at_ms, row)
        if how != "sigstop":
            self.live.discard(victim)

        def ends(r: Rec) -> bool:
            return r[1] > at_ms and (r[2] != victim or r[1] >= resumed_ms)

        if not wait_until(lambda: all(any(map(ends, tail.records[p])) for p in affected), 90):
            return None
        time.sleep(1.0)
        silence, first_s, successor, moved, where, upstream = {}, {}, {}, {}, {}, {}
        for p in affected:
            recs = list(tail.records[p])
            first = min((r for r in recs if ends(r)), key=lambda r: r[1])
            # Gaps that end after the signal: one that ended before it is not its doing (it
            # was the join just before, which settled a moment earlier, or the machine).
            silence[p] = max_gap_ms(recs, at_ms, first[1] + 1000) / 1000
            upstream[p] = self.input.silence_ms(p, at_ms, first[1] + 1000) / 1000
            where[p] = worst_gap_at_ms(recs, at_ms, first[1] + 1000)
            first_s[p] = round((first[1] - at_ms) / 1000, 3)
            successor[p] = first[2]
            gap = handover_gap_ms(recs, at_ms, first[1] + 1000)
            if gap is not None:
                moved[p] = gap / 1000
        row.update(
            silence_s=silence,
            input_silence_s=upstream,
            to_first_record_of_successor_s=first_s,
            successor=successor,
            handover_gap_s=moved,
            worst_gap_at_ms=where,
        )
        if how == "sigterm":
            row["exit_code"] = proc.wait(30)
        end_ms = time.time_ns() / 1e6
        if how == "sigstop":
            row["settled_as"] = self.settle()
            settled_ms = end_ms = time.time_ns() / 1e6
            row["settled_after_sigcont_s"] = round((settled_ms - resumed_ms) / 1000, 2)
            row["silence_until_settled_s"] = self.silence_s(affected, at_ms, settled_ms)
            row["zombie_records"] = self.zombies(row)  # so far: counted again at the end
        row["control_records_by_kind"] = self.control_kinds(at_ms, end_ms)
        return row

    def _signal(self, proc: Proc, how: str, at_ms: float, row: dict[str, Any]) -> float:
        """Make fault ``how`` on ``proc`` (signalled at ``at_ms``); when the stopped relay's
        own records count again (after a SIGCONT; never after a kill or a SIGTERM)."""
        if how == "kill":
            proc.kill()
            return math.inf
        if how == "sigterm":
            proc.terminate()
            return math.inf
        try:
            proc.pause()  # returns once every thread has stopped
            row["frozen_after_s"] = round((time.time_ns() / 1e6 - at_ms) / 1000, 3)
            time.sleep(max(0.0, self.stop_s - (time.time_ns() / 1e6 - at_ms) / 1000))
        finally:
            proc.resume()
        resumed_ms = time.time_ns() / 1e6
        row["stopped_s"] = round((resumed_ms - at_ms) / 1000, 3)
        return resumed_ms

    def zombies(self, row: dict[str, Any]) -> int:
        """The stopped relay's records visible after its successor's first, over the
        partitions of a ``sigstop`` ``row`` (:func:`bench.relay_failover.checks.zombie_records`);
        also kept per partition in the row."""
        tail, victim = self.tail, row["victim"]
        row["zombie_records_per_partition"] = {
            p: zombie_records(list(tail.records[p]), list(tail.controls[p]), victim, row["at_ms"])
            for p in row["affected_partitions"]
        }
        return sum(row["zombie_records_per_partition"].values())

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
        # partitions it gives them. Before that, only the new process's start-up shares the
        # machine's 2 cores with the pipeline (on its own host it would not).
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
            "control_records_by_kind": self.control_kinds(join_ms, settled_ms),
            "settled_as": how,
        }

    def play(
        self, rounds: range, cluster: int, faults: tuple[str, ...] = FAULTS
    ) -> list[dict[str, Any]]:
        """The ``faults`` of each of ``rounds`` (on a settled cluster) until done or no longer
        settled."""
        rows: list[dict[str, Any]] = []
        for i in rounds:
            for fault in faults:
                row = self.join() if fault == "join" else self.stop_active(fault)
                if row is None:
                    self.diagnostic = (
                        f"round {i} {fault}: not taken over within 90 s; relays meant to be "
                        f"live that had exited (exit code): {self.exited()}"
                    )
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
