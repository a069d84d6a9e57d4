"""Shared helpers of the end-to-end benchmarks: a whole pipeline, a feed, topic counters.

A pipeline is one :class:`~pricing_ha.local.cluster.PricingCluster` (fresh topics) with both
publishing groups (``p1`` and ``p2``, ``members`` each), two relays (``r1``, ``r2``) and, once
they all lead, a synthetic feed. Each feed process restarts every instrument's seq at 1, so a
cluster carries exactly one feed run: a new rate needs a new cluster.
"""

from __future__ import annotations

import bisect
import itertools
import os
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _common import TopicTail, wait_until
from confluent_kafka import Message

from pricing_ha.local.cluster import PricingCluster, Record
from pricing_ha.local.judging import judge
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.seqs import value_epoch
from pricing_ha.local.verdict import Verdict

MEMBER_NAMES = "abcd"


def start_pipeline(
    procs: ProcessGroup,
    bootstrap: str,
    workdir: Path,
    members: int = 1,
    relays: int = 2,
    *,
    cluster: PricingCluster | None = None,
) -> PricingCluster:
    """Fresh topics (unless ``cluster``, whose topics exist, is given); ``members`` publishers
    per group and ``relays`` relays, all leading."""
    if cluster is None:
        cluster = PricingCluster(procs, bootstrap, workdir)
        cluster.create_topics()
    for group in ("p1", "p2"):
        for m in MEMBER_NAMES[:members]:
            cluster.publisher(group, m)
    for r in range(1, relays + 1):
        cluster.relay(f"r{r}")
    cluster.wait_led(["p1", "p2", "relay"])
    started = [cluster.members[f"relay-r{r}"] for r in range(1, relays + 1)]
    # Leading is not yet relaying: each relay's standby first reads prices to its end (long
    # when prices holds many records), then writes its takeover markers.
    if not wait_until(lambda: _took(started) >= cluster.partitions, 300):
        raise AssertionError(f"the relays did not take every partition: {_took(started)}")
    return cluster


def _took(relays: list[Proc]) -> int:
    """How many partition takeovers the relays have logged."""
    return sum(p.log_path.read_text(errors="replace").count("relay took partition") for p in relays)


def start_feed(
    cluster: PricingCluster,
    *,
    instruments: int,
    rate_hz: float,
    count: int | None = None,
    duration_s: float | None = None,
) -> Proc:
    """``pricing-ha feed``: ``rate_hz`` per instrument (0: unpaced), summary as feed() writes."""
    args = [
        "feed",
        f"--instruments={instruments}",
        f"--rate={rate_hz:g}",
        f"--summary-out={cluster.workdir / f'feed-{cluster.uid}.json'}",
    ]
    if count is not None:
        args.append(f"--count={count}")
    if duration_s is not None:
        args.append(f"--duration={duration_s:g}")
    return cluster.cli("feed", *args)


class TopicCounter:
    """Counts the records of some topics by consuming them from the beginning, in a thread.

    ``samples[topic]`` is a list of (monotonic time, cumulative count), one entry per fetch
    that brought records of that topic. Records are counted as read, not from watermarks.
    """

    def __init__(self, bootstrap: str, topics: list[str], partitions: int) -> None:
        """Start counting."""
        self.topics = topics
        self.counts = dict.fromkeys(topics, 0)
        now = time.monotonic()
        self.samples: dict[str, list[tuple[float, int]]] = {t: [(now, 0)] for t in topics}
        self._tail = TopicTail(bootstrap, topics, partitions, self._count, name="bench-count")

    def _count(self, batch: list[Message], received: float) -> None:
        seen: set[str] = set()
        for msg in batch:
            topic = msg.topic() or ""
            self.counts[topic] += 1
            seen.add(topic)
        for topic in seen:
            self.samples[topic].append((received, self.counts[topic]))

    def close(self) -> None:
        """Stop counting."""
        self._tail.close()

    def reached(self, topic: str, n: float) -> float | None:
        """The monotonic time at which ``topic`` first had ``n`` records (None if not yet)."""
        samples = list(self.samples[topic])
        i = bisect.bisect_left([c for _, c in samples], n)
        return samples[i][0] if i < len(samples) else None

    def count_at(self, topic: str, t: float) -> int:
        """The count of ``topic`` as last sampled at or before monotonic time ``t``."""
        samples = list(self.samples[topic])
        i = bisect.bisect_right([s for s, _ in samples], t)
        return samples[i - 1][1] if i else 0

    def rate(self, topic: str, lo: float, hi: float) -> float | None:
        """Records per second while ``topic`` grew from ``lo`` to ``hi`` records."""
        t_lo, t_hi = self.reached(topic, lo), self.reached(topic, hi)
        if t_lo is None or t_hi is None or t_hi <= t_lo:
            return None
        return (hi - lo) / (t_hi - t_lo)

    def wait_for(self, topic: str, n: int, *, timeout_s: float, stall_s: float) -> bool:
        """Wait for ``n`` records of ``topic``; give up on timeout or ``stall_s`` without growth."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.counts[topic] >= n:
                return True
            last_growth = self.samples[topic][-1][0]
            if time.monotonic() - max(last_growth, deadline - timeout_s) > stall_s:
                return False
            time.sleep(0.1)
        return self.counts[topic] >= n


def exactly_once(cluster: PricingCluster, wait_s: float = 0.0) -> dict[str, Any]:
    """Judge ``prices`` (read ``read_committed``) against the feed, retrying for up to
    ``wait_s`` until it is exactly once.

    Returns the verdict's counts, summed over the instruments, and under ``topic`` the
    duplicates, reorderings and gaps counted from the topic alone
    (:func:`seq_defects`); ``ok`` only if both find nothing.
    """
    expected = cluster.expected()
    last: list[tuple[Verdict, list[Record]]] = []  # the latest read only (1M+ records)

    def ok() -> bool:
        prices = cluster.read("prices")
        last[:] = [(judge(expected, prices), prices)]
        return last[0][0].ok and _clean(seq_defects(prices))

    wait_until(ok, wait_s, poll_s=1.0)
    v, prices = last[0]
    topic = seq_defects(prices)
    out: dict[str, Any] = {
        "ok": v.ok and _clean(topic),
        "expected": sum(i.expected for i in v.instruments),
        "delivered": sum(i.delivered for i in v.instruments),
        "duplicates": sum(i.duplicates for i in v.instruments),
        "missing": sum(i.missing for i in v.instruments),
        "out_of_order": sum(i.out_of_order for i in v.instruments),
        "topic": topic,
    }
    if not out["ok"]:
        out["defects"] = locate_defects(prices)  # the records judged, not a later read
    return out


def seq_defects(prices: Iterable[Record]) -> dict[str, int]:
    """Per instrument, in the order a reader sees them (partition, offset), counted from the
    topic alone: ``duplicates`` (a seq seen before), ``out_of_order`` (a seq below one seen
    before) and ``gaps`` (seqs absent below the highest one seen, from seq 1, per epoch);
    ``instruments`` is how many were counted.
    """
    by_instrument: dict[str, list[tuple[int, int]]] = {}
    for r in sorted(prices, key=lambda r: (r.partition, r.offset)):
        seq = r.seq
        if r.key is None or seq is None:
            continue
        by_instrument.setdefault(r.key.decode(), []).append((value_epoch(r.value), seq))
    out = {"instruments": len(by_instrument), "duplicates": 0, "out_of_order": 0, "gaps": 0}
    for positions in by_instrument.values():
        unique = set(positions)
        out["duplicates"] += len(positions) - len(unique)
        out["out_of_order"] += sum(1 for a, b in itertools.pairwise(positions) if b < a)
        for epoch in {e for e, _ in unique}:
            seqs = {s for e, s in unique if e == epoch}
            out["gaps"] += max(seqs) - len(seqs)
    return out


def _clean(topic: dict[str, int]) -> bool:
    return topic["duplicates"] == topic["out_of_order"] == topic["gaps"] == 0


def locate_defects(prices: list[Record], limit: int = 40) -> dict[str, Any]:
    """Where ``prices`` repeats, reorders or skips a seq: the first ``limit`` such records,
    each with the copy (or the higher seq, or the record before the skip) it follows, to line
    them up with the run's events.

    Each entry: instrument, seq, kind (``duplicate``, ``out_of_order``, or ``gap`` with how
    many seqs were skipped), and for the record and the earlier one: partition, offset,
    timestamp (ms) and the relay member that wrote it.
    Grouped per partition as runs of consecutive offsets, so a window of two writers shows as
    one run.
    """

    def where(r: Record) -> dict[str, Any]:
        return {
            "partition": r.partition,
            "offset": r.offset,
            "timestamp_ms": r.timestamp_ms,
            "relay": r.headers.get("relay"),
        }

    seen: dict[tuple[str, int], Record] = {}
    highest: dict[str, Record] = {}
    found: list[dict[str, Any]] = []
    for r in sorted(prices, key=lambda r: (r.partition, r.offset)):
        if r.key is None or "seq" not in r.headers:
            continue
        instrument, seq = r.key.decode(), int(r.headers["seq"])
        earlier = seen.get((instrument, seq))
        top = highest.get(instrument)
        if earlier is not None:
            found.append(
                {
                    "kind": "duplicate",
                    "instrument": instrument,
                    "seq": seq,
                    "record": where(r),
                    "earlier": where(earlier),
                }
            )
        elif top is not None and int(top.headers["seq"]) > seq:
            found.append(
                {
                    "kind": "out_of_order",
                    "instrument": instrument,
                    "seq": seq,
                    "record": where(r),
                    "after": where(top),
                }
            )
        elif top is not None and seq > int(top.headers["seq"]) + 1:
            found.append(
                {
                    "kind": "gap",
                    "instrument": instrument,
                    "seq": seq,
                    "skipped": seq - int(top.headers["seq"]) - 1,
                    "record": where(r),
                    "after": where(top),
                }
            )
        seen.setdefault((instrument, seq), r)
        if top is None or int(top.headers["seq"]) < seq:
            highest[instrument] = r
    runs: list[dict[str, Any]] = []
    for d in found:
        rec = d["record"]
        last = runs[-1] if runs else None
        if (
            last
            and last["partition"] == rec["partition"]
            and rec["offset"] - last["to_offset"] <= 50
        ):
            last["to_offset"] = rec["offset"]
            last["to_timestamp_ms"] = rec["timestamp_ms"]
            last["count"] += 1
            last["relays"] = sorted({*last["relays"], str(rec["relay"])})
        else:
            runs.append(
                {
                    "partition": rec["partition"],
                    "from_offset": rec["offset"],
                    "to_offset": rec["offset"],
                    "from_timestamp_ms": rec["timestamp_ms"],
                    "to_timestamp_ms": rec["timestamp_ms"],
                    "count": 1,
                    "relays": [str(rec["relay"])],
                }
            )
    return {"total": len(found), "runs": runs, "first": found[:limit]}


def foreign_processes() -> list[str]:
    """Broker, pricing-ha and pytest processes on this machine that this benchmark did not start.

    The machine may be shared (other test runs); their processes compete for the same cores.
    """
    me = os.getpid()
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid = int(proc.name)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        commands[pid] = cmd.strip()

    def mine(pid: int) -> bool:
        while pid > 1:
            if pid == me:
                return True
            pid = parents.get(pid, 1)
        return False

    wanted = ("kafka.Kafka", "pricing-ha", "pytest", "pricing_ha.")
    return sorted(
        f"{pid} {cmd[:120]}"
        for pid, cmd in commands.items()
        if any(w in cmd for w in wanted) and not mine(pid)
    )


def code_version() -> dict[str, object]:
    """The git commit of the working tree and the files that differ from it."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return out.stdout.rstrip("\n")

    changed = [line[3:] for line in git("status", "--porcelain").splitlines()]
    return {"head": git("rev-parse", "--short", "HEAD"), "uncommitted": changed}
