"""Per-instrument silence on the union of both groups' output while publishers are killed.

Each run is a fresh :class:`~pricing_ha.local.cluster.PricingCluster` (fresh topics) on one
embedded broker: two publishing groups of two members each (``p1/a``, ``p1/b``, ``p2/a``,
``p2/b``, separate OS processes) and the synthetic feed (20 instruments at 20 Hz each). Once all
four members have been publishing for S seconds, one fault is injected:

* ``member``: SIGKILL of ``p1/a`` (its partitions wait for NELI to hand them to ``p1/b``);
* ``group``: SIGKILL of both ``p2`` members at once (a lost availability zone).

The feed keeps going for ``--observe-s`` seconds, then stops; once the union is complete both
topics are read back and judged from the data:

* silence: for each instrument, the longest time between the first publications (header
  ``publish_ns``, over both groups) of consecutive seqs, counting only seq pairs whose later
  publication falls after ``kill - 1 s``; the run's figure is the worst instrument;
* the feed's own gap over the same seq pairs (``source_time_ns`` on ``md.quotes``): the shuffled
  round order makes an instrument's interval vary between ~0 and ~2 ticks, so this, not the
  nominal tick, is what the union's silence should be compared with; ``excess`` is the worst
  (union gap - feed gap) over the same pairs;
* the same silence measured over a fault-free stretch before the kill (baseline);
* in ``member`` runs, the silence of ``p1``'s own stream (what the takeover costs a lone group);
* missing: every (instrument, seq) the feed acknowledged must be on the union.

Broker, feed, members and the benchmark share this machine's cores, so CPU contention shows up
as silence too: the 1-minute load average at each kill is kept with the figures.

Run: ``.venv/bin/python bench/publish_silence.py [--runs 5] [--observe-s 15]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Message

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import TopicTail, summary, wait_until, write

from pricing_ha.local.broker import EmbeddedBroker
from pricing_ha.local.cluster import PricingCluster, Record, by_group, missing, wait_for
from pricing_ha.local.procs import ProcessGroup

INSTRUMENTS = 20
RATE_HZ = 20.0
TICK_S = 1 / RATE_HZ
S = PricingCluster.__dataclass_fields__["session_ms"].default / 1000
SCENARIOS = ("member", "group")
_Pairs = dict[tuple[str, int], int]  # (instrument, seq) -> ns


class Tail:
    """Follows ``prices.raw`` in a thread: when each (group, member) last published."""

    def __init__(self, cluster: PricingCluster) -> None:
        """Start following from the beginning of the topic."""
        self.last: dict[tuple[str, str], int] = {}
        self._tail = TopicTail(
            cluster.bootstrap, [cluster.topics["raw"]], cluster.partitions, self._keep
        )

    def _keep(self, batch: list[Message], _received: float) -> None:
        for msg in batch:
            h = dict(msg.headers() or ())
            key = (h["group"].decode(), h["member"].decode())
            self.last[key] = max(self.last.get(key, 0), int(h["publish_ns"]))

    def all_recent(self, members: list[tuple[str, str]], within_s: float = 1.0) -> bool:
        """Whether every one of ``members`` published within the last ``within_s``."""
        now = time.time_ns()
        return all(now - self.last.get(m, 0) < within_s * 1e9 for m in members)

    def close(self) -> None:
        """Stop following."""
        self._tail.close()


def _first(records: list[Record], group: str | None = None) -> _Pairs:
    """The first publication time of each (instrument, seq), of ``group`` or of the union."""
    out: _Pairs = {}
    for r in records:
        if r.key is None or (group is not None and r.headers.get("group") != group):
            continue
        k = (r.key.decode(), int(r.headers["seq"]))
        ns = int(r.headers["publish_ns"])
        out[k] = min(out.get(k, ns), ns)
    return out


def _gaps(first: _Pairs, lo_ns: float, hi_ns: float) -> dict[tuple[str, int], float]:
    """(instrument, seq) -> seconds until seq + 1's first publication, for pairs in a window.

    A pair counts when seq + 1 was first published in ``[lo_ns, hi_ns]``.
    """
    out: dict[tuple[str, int], float] = {}
    for (instrument, seq), ns in first.items():
        nxt = first.get((instrument, seq + 1))
        if nxt is not None and lo_ns <= nxt <= hi_ns:
            out[(instrument, seq)] = (nxt - ns) / 1e9
    return out


def _worst_per_instrument(gaps: dict[tuple[str, int], float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for (instrument, _), g in gaps.items():
        out[instrument] = max(out.get(instrument, 0.0), g)
    return out


def _wait_settled(cluster: PricingCluster, tail: Tail, started: float) -> float:
    """Wait until all four members have been publishing for S seconds (and 2S since start)."""
    members = [(cluster.group(g), m) for g in ("p1", "p2") for m in ("a", "b")]
    since: list[int] = []

    def held() -> bool:
        if not tail.all_recent(members):
            return False
        since.append(time.time_ns())
        time.sleep(S)
        return tail.all_recent(members)

    if not wait_until(held, 90, poll_s=0.2):
        raise AssertionError(f"the members did not all publish within 90 s: {tail.last}")
    time.sleep(max(0.0, started + 2 * S - time.monotonic()))
    return since[-1]


def run_once(bootstrap: str, scenario: str, observe_s: float) -> dict[str, Any]:
    """One fresh cluster, one fault; return its figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-silence-"))
    with ProcessGroup(workdir / "logs") as procs:
        c = PricingCluster(procs, bootstrap, workdir)
        c.create_topics()
        tail = Tail(c)
        try:
            for g in ("p1", "p2"):
                for m in ("a", "b"):
                    c.publisher(g, m)
            started = time.monotonic()
            feed = c.feed(instruments=INSTRUMENTS, rate=RATE_HZ, duration=3600)
            settled_ns = _wait_settled(c, tail, started)
            load_at_kill = os.getloadavg()[0]
            kill_ns = time.time_ns()
            victims = ["p1-a"] if scenario == "member" else ["p2-a", "p2-b"]
            for v in victims:
                c.members[v].kill()
            time.sleep(observe_s)
            stop_ns = time.time_ns()
            feed.terminate()
            assert feed.wait(60) == 0, feed.log_tail()
        finally:
            tail.close()
        expected = c.expected()
        groups = ["p1", "p2"]

        def union_complete() -> bool:
            raw = c.read("raw", idle_s=0.5)
            have = set().union(*(by_group(raw, c.group(g)) for g in groups))
            return not missing(have, expected)

        try:
            wait_for(union_complete, 60, "the union to cover every seq")
            if scenario == "member":
                wait_for(
                    lambda: not missing(set(by_group(c.read("raw", 0.5), c.group("p1"))), expected),
                    60,
                    "p1 to cover every seq",
                )
        except AssertionError as exc:
            print(f"  {exc}", flush=True)
        raw = c.read("raw")
        quotes = c.read("quotes")
    out = _judge(raw, quotes, expected, (settled_ns, kill_ns, stop_ns))
    if scenario == "member":
        lo, hi = kill_ns - 1e9, stop_ns + 5e9
        own = _worst_per_instrument(_gaps(_first(raw, c.group("p1")), lo, hi))
        out["p1_own_worst_silence_s"] = round(max(own.values()), 4) if own else None
        out["p1_missing"] = len(missing(set(by_group(raw, c.group("p1"))), expected))
    out["load_average_1m_at_kill"] = round(load_at_kill, 2)
    out["workdir"] = str(workdir)
    return out


def _judge(
    raw: list[Record],
    quotes: list[Record],
    expected: dict[str, int],
    times: tuple[int, int, int],
) -> dict[str, Any]:
    """The figures of one run, from the data (``times``: settled, kill and feed stop, ns)."""
    settled_ns, kill_ns, stop_ns = times
    union = _first(raw)
    gone = missing(set(union), expected)
    source: _Pairs = {}  # (instrument, seq) -> when the feed sent it
    for r in quotes:
        q = orjson.loads(r.value or b"{}")
        source[(q["instrument"], int(q["seq"]))] = int(q["source_time_ns"])
    lo, hi = kill_ns - 1e9, stop_ns + 5e9
    union_gaps = _gaps(union, lo, hi)
    worst_inst = _worst_per_instrument(union_gaps)
    feed_gaps = {
        k: (source[(k[0], k[1] + 1)] - source[k]) / 1e9
        for k in union_gaps
        if k in source and (k[0], k[1] + 1) in source
    }
    excess = max(union_gaps[k] - feed_gaps[k] for k in feed_gaps)
    latency = max(
        (union[(i, s + 1)] - source[(i, s + 1)]) / 1e9
        for (i, s) in union_gaps
        if (i, s + 1) in source
    )
    base = _worst_per_instrument(_gaps(union, settled_ns, kill_ns - 1e9))
    return {
        "worst_silence_s": round(max(worst_inst.values()), 4),
        "worst_instrument": max(worst_inst, key=lambda i: worst_inst[i]),
        "feed_worst_gap_s": round(max(feed_gaps.values()), 4),
        "worst_excess_over_feed_s": round(excess, 4),
        "worst_latency_s": round(latency, 4),
        "baseline_worst_silence_s": round(max(base.values()), 4) if base else None,
        "seq_pairs_judged": len(union_gaps),
        "feed_quotes": sum(expected.values()),
        "missing_from_union": len(gone),
        "missing_examples": gone[:5],
    }


def main() -> None:
    """Run every scenario ``--runs`` times and write bench/results/publish_silence.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--observe-s", type=float, default=5 * S)
    args = parser.parse_args()
    began = time.monotonic()
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in SCENARIOS}
    with EmbeddedBroker() as broker:
        for i in range(args.runs):
            for scenario in SCENARIOS:
                r = run_once(broker.bootstrap, scenario, args.observe_s)
                results[scenario].append(r)
                extra = (
                    f", p1 alone {r['p1_own_worst_silence_s']:.3f} s"
                    if scenario == "member"
                    else ""
                )
                print(
                    f"run {i} {scenario}: worst union silence {r['worst_silence_s']:.3f} s "
                    f"({r['worst_instrument']}), feed's worst gap {r['feed_worst_gap_s']:.3f} s, "
                    f"excess {r['worst_excess_over_feed_s']:.3f} s, baseline "
                    f"{r['baseline_worst_silence_s']:.3f} s{extra}; missing "
                    f"{r['missing_from_union']} of {r['feed_quotes']} (load "
                    f"{r['load_average_1m_at_kill']:.1f})",
                    flush=True,
                )
    figures: dict[str, Any] = {
        "runs": args.runs,
        "instruments": INSTRUMENTS,
        "rate_per_instrument_hz": RATE_HZ,
        "feed_tick_interval_s": TICK_S,
        "session_timeout_s": S,
        "observe_after_kill_s": args.observe_s,
    }
    for scenario, rs in results.items():
        fig: dict[str, Any] = {
            "worst_silence_s": summary([r["worst_silence_s"] for r in rs]),
            "feed_worst_gap_s": summary([r["feed_worst_gap_s"] for r in rs]),
            "worst_excess_over_feed_s": summary([r["worst_excess_over_feed_s"] for r in rs]),
            "worst_latency_s": summary([r["worst_latency_s"] for r in rs]),
            "baseline_worst_silence_s": summary(
                [r["baseline_worst_silence_s"] for r in rs if r["baseline_worst_silence_s"]]
            ),
            "load_average_1m_at_kill": summary([r["load_average_1m_at_kill"] for r in rs]),
            "missing_from_union_total": sum(r["missing_from_union"] for r in rs),
            "no_seq_missing": all(r["missing_from_union"] == 0 for r in rs),
        }
        if scenario == "member":
            fig["p1_own_worst_silence_s"] = summary([r["p1_own_worst_silence_s"] for r in rs])
            fig["p1_missing_total"] = sum(r["p1_missing"] for r in rs)
        fig["per_run"] = rs
        figures[scenario] = fig
    figures["total_runtime_s"] = round(time.monotonic() - began, 1)
    write("publish_silence", figures)


if __name__ == "__main__":
    main()
