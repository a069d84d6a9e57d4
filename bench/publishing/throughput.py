"""Publishing throughput of one group: quotes priced per second by 2 members, and by 1.

``md.quotes`` (4 partitions) is pre-loaded with N quotes over K instruments as fast as the feed
can go (``pricing-ha feed --rate 0``). Then the members of a fresh publishing group are started
(``pricing-ha run``, separate OS processes) and the benchmark polls the group's committed quote
positions until every partition is consumed to its end (the members commit only after their
output is acknowledged). The members are stopped and ``prices.raw`` is read back: the figures
come from the data, from the ``publish_ns`` header each price carries:

* steady-state rate: distinct quotes priced / (last first-publication - first first-publication);
* p10-p90 rate: the same over the middle 80 % of the quotes (ignores ramp-up and the tail);
* end-to-end: N / (last publication - process spawn), which includes start-up and NELI join.

The two-member group (``p1``) runs first, then a single member (``p2``) on the same quotes: a
group's first leader starts from the beginning of ``md.quotes``, so both price all N.
Everything (broker, feed, members, the reader) shares this machine's cores.

Run: ``.venv/bin/python -m bench.publishing.throughput [--quotes 200000] [--instruments 100]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from bench.common.report import write
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.tails import consumer
from pricing_ha.local.waiting import wait_until
from pricing_ha.publishing.publisher import quotes_group_id

CASE_TIMEOUT_S = 150.0


def _scan(bootstrap: str, topic: str, partitions: int, visit: Any, idle_s: float = 2.0) -> None:
    """Call ``visit(msg)`` for every message of ``topic`` until nothing arrives for ``idle_s``."""
    reader = consumer(bootstrap)
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    last_new = time.monotonic()
    try:
        while time.monotonic() - last_new < idle_s:
            batch = reader.consume(10_000, 0.2)
            for msg in batch:
                if msg.error() is None:
                    visit(msg)
            if batch:
                last_new = time.monotonic()
    finally:
        reader.close()


def _quote_ends(cluster: PricingCluster) -> tuple[int, dict[int, int]]:
    """Count ``md.quotes`` by consuming it; return (count, partition -> next offset after last)."""
    ends: dict[int, int] = {}
    count = 0

    def visit(msg: Any) -> None:
        nonlocal count
        count += 1
        p, o = msg.partition(), msg.offset()
        ends[p] = max(ends.get(p, 0), o + 1)

    _scan(cluster.bootstrap, cluster.topics["quotes"], cluster.partitions, visit)
    return count, ends


def _wait_committed(cluster: PricingCluster, group: str, ends: dict[int, int]) -> bool:
    """Poll the group's committed quote positions until each partition is consumed to its end."""
    probe = consumer(cluster.bootstrap, quotes_group_id(cluster.group(group)))
    quotes = cluster.topics["quotes"]

    def consumed() -> bool:
        try:
            tps = probe.committed([TopicPartition(quotes, p) for p in ends], timeout=5)
        except Exception as exc:  # noqa: BLE001 - a slow answer: just ask again
            print(f"  committed(): {exc}", flush=True)
            return False
        return all(tp.offset >= ends[tp.partition] for tp in tps)

    try:
        return wait_until(consumed, CASE_TIMEOUT_S, poll_s=0.25)
    finally:
        probe.close()


def _publications(cluster: PricingCluster, group: str) -> dict[str, Any]:
    """Read ``prices.raw``: this group's first publication time per (instrument, seq)."""
    first: dict[tuple[bytes, int], int] = {}
    records = 0
    members: dict[str, int] = {}
    wanted = cluster.group(group)

    def visit(msg: Any) -> None:
        nonlocal records
        h = dict(msg.headers() or ())
        if h.get("group", b"").decode() != wanted:
            return
        records += 1
        member = h["member"].decode()
        members[member] = members.get(member, 0) + 1
        k = (msg.key(), int(h["seq"]))
        ns = int(h["publish_ns"])
        prev = first.get(k)
        if prev is None or ns < prev:
            first[k] = ns

    _scan(cluster.bootstrap, cluster.topics["raw"], cluster.partitions, visit)
    return {"first": first, "records": records, "members": members}


def run_case(
    cluster: PricingCluster, group: str, members: int, n: int, ends: dict[int, int]
) -> dict[str, Any]:
    """Start ``members`` members of ``group``, wait until they priced everything, measure."""
    print(f"{group}: {members} member(s) pricing {n} pre-loaded quotes ...", flush=True)
    spawned_ns = time.time_ns()
    procs = [cluster.publisher(group, chr(ord("a") + i)) for i in range(members)]
    done = _wait_committed(cluster, group, ends)
    waited_s = (time.time_ns() - spawned_ns) / 1e9
    for p in procs:
        p.stop()
    if not done:
        print(f"  not finished within {CASE_TIMEOUT_S:.0f} s; figures are partial", flush=True)
    pubs = _publications(cluster, group)
    times = sorted(pubs["first"].values())
    distinct = len(times)
    out: dict[str, Any] = {
        "members": members,
        "complete": done and distinct == n,
        "distinct_quotes_priced": distinct,
        "records_on_prices_raw": pubs["records"],
        "duplicates": pubs["records"] - distinct,
        "records_per_member": pubs["members"],
        "committed_all_after_s": round(waited_s, 2) if done else None,
    }
    if distinct < 2:
        return out
    first, last = times[0], times[-1]
    i10, i90 = distinct // 10, (9 * distinct) // 10
    lo, hi = times[i10], times[i90]
    out |= {
        "startup_to_first_price_s": round((first - spawned_ns) / 1e9, 3),
        "first_to_last_price_s": round((last - first) / 1e9, 3),
        "steady_quotes_per_s": round((distinct - 1) / ((last - first) / 1e9)),
        "p10_p90_quotes_per_s": round((i90 - i10) / ((hi - lo) / 1e9)),
        "end_to_end_quotes_per_s": round(distinct / ((last - spawned_ns) / 1e9)),
    }
    print(
        f"  {distinct}/{n} priced ({out['duplicates']} duplicates); steady "
        f"{out['steady_quotes_per_s']} quotes/s over {out['first_to_last_price_s']} s; p10-p90 "
        f"{out['p10_p90_quotes_per_s']} quotes/s; end-to-end {out['end_to_end_quotes_per_s']} "
        f"quotes/s (first price {out['startup_to_first_price_s']} s after spawn); per member "
        f"{pubs['members']}",
        flush=True,
    )
    return out


def main() -> None:
    """Pre-load quotes, run the 2-member and 1-member cases, write the JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quotes", type=int, default=200_000)
    parser.add_argument("--instruments", type=int, default=100)
    args = parser.parse_args()
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    figures: dict[str, Any] = {"quotes": args.quotes, "instruments": args.instruments}
    # Other work on the machine shares the cores: keep its load next to the figures.
    figures["load_average_1m_before"] = round(os.getloadavg()[0], 2)
    with LocalKafka() as broker, ProcessGroup(workdir / "logs") as procs:
        cluster = PricingCluster(procs, broker.bootstrap, workdir)
        cluster.create_topics()
        figures["partitions"] = cluster.partitions
        t0 = time.monotonic()
        feed = cluster.cli(
            "feed",
            "feed",
            "--rate=0",
            f"--count={args.quotes}",
            f"--instruments={args.instruments}",
            f"--summary-out={workdir / f'feed-{cluster.uid}.json'}",
        )
        assert feed.wait(300) == 0, feed.log_tail()
        feed_s = time.monotonic() - t0
        count, ends = _quote_ends(cluster)
        assert count == args.quotes, f"md.quotes holds {count}, expected {args.quotes}"
        assert sum(cluster.expected().values()) == args.quotes
        figures["preload"] = {
            "seconds": round(feed_s, 2),
            "quotes_per_s_incl_startup": round(args.quotes / feed_s),
            "per_partition": {str(p): ends[p] for p in sorted(ends)},
        }
        print(f"pre-loaded {count} quotes in {feed_s:.1f} s (feed process incl. start-up)")
        figures["two_members"] = run_case(cluster, "p1", 2, args.quotes, ends)
        figures["one_member"] = run_case(cluster, "p2", 1, args.quotes, ends)
        two, one = figures["two_members"], figures["one_member"]
        if two.get("steady_quotes_per_s") and one.get("steady_quotes_per_s"):
            figures["speed_up_two_vs_one"] = round(
                two["steady_quotes_per_s"] / one["steady_quotes_per_s"], 2
            )
    figures["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    figures["total_runtime_s"] = round(time.monotonic() - began, 1)
    write("publish_throughput", figures)


if __name__ == "__main__":
    main()
