"""Shared helpers of the end-to-end benchmarks: a whole pipeline, a feed, topic counters.

A pipeline is one :class:`~pricing_ha.local.cluster.PricingCluster` (fresh topics) with both
publishing groups (``p1`` and ``p2``, ``members`` each), two relays (``r1``, ``r2``) and, once
they all lead, a synthetic feed. Each feed process restarts every instrument's seq at 1, so a
cluster carries exactly one feed run: a new rate needs a new cluster.
"""

from __future__ import annotations

import bisect
import time
from pathlib import Path

from confluent_kafka import Message

from bench.common.procstat import ProcSampler
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.tails import TopicTail
from pricing_ha.local.waiting import wait_until

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


def feed_and_wait(
    cluster: PricingCluster, sampler: ProcSampler, instruments: int, rate: float, count: int
) -> tuple[float, float]:
    """Feed ``count`` quotes at ``rate`` in total, its CPU sampled as ``feed``; wait for it to
    exit (successfully, within 120 s of its schedule). Returns the monotonic times of its
    start and its exit."""
    t0 = time.monotonic()
    feed = start_feed(cluster, instruments=instruments, rate_hz=rate / instruments, count=count)
    sampler.add("feed", feed.pid)
    assert feed.wait(count / rate + 120) == 0, feed.log_tail()
    return t0, time.monotonic()


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
