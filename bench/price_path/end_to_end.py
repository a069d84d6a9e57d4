"""End to end on one machine: throughput of deduplicated prices, and feed->subscriber latency.

Every case is a fresh pipeline (:func:`bench.common.cluster.start_pipeline`) on one local Apache
Kafka: publishing groups ``p1`` and ``p2`` (``--members`` each, default 1: the machine has 2 cores),
relays ``r1`` and ``r2`` and, once every group leads every partition and the relays have taken
theirs (rebuilt from ``prices``), the synthetic feed (``pricing-ha feed``, 100 instruments).
Everything (broker, feed, members, relays, subscriber, probes and this script) shares the machine's
cores.

Throughput (records on ``prices`` are counted by consuming it; broker watermarks are not used):

* unpaced: ``--rate 0 --count N``; the feed outruns the pipeline, which then drains the backlog.
  Figures: the rate at which ``prices`` grew from 10 % to 90 % of N (and ``prices.raw`` from
  10 % to 90 % of 2N, both groups' copies), the rate after the feed had exited, and an
  exactly-once check of all N (:func:`pricing_ha.local.judging.judge`);
* paced ladder: one fresh pipeline per total rate R (fractions of the unpaced rate), the feed
  sending R * ``--step-s`` quotes; figures: the rates at which ``md.quotes`` and ``prices`` grew
  from 3 s after the feed started to the feed's exit (steady), how far behind ``prices`` was
  when the feed exited, and how long it then took to drain. A step counts as sustained if
  ``prices`` grew by >= 95 % of what the feed sent in that window, was at most R / 2 records
  (0.5 s) behind at the feed's exit, and drained within 1 s.

Latency, per total rate (100 instruments x 10 Hz and x 50 Hz): the feed runs at that rate; a
``pricing-ha subscribe`` of ``prices`` (relay mode) and, side by side in the same window (the
machine is shared, so load varies over time), one of ``prices.raw`` (``--direct``: the subscriber
arbitrates both groups' copies) each run ``--measure-s``; their summaries give ``source_to_receive``
(the quote's ``source_time_ns``, stamped by the feed, to the subscriber's receive time) and
``publish_to_receive`` percentiles. In the same window a reference probe
(``bench.price_path.hop_probe``) measures one broker hop at the same rate on a topic of its own: a
producer stamping the time into the value and a consumer with ``fetch.wait.max.ms=10``.

Run: ``.venv/bin/python -m bench.price_path.end_to_end [--members 1] [--count 100000] [--ladder
0.6,0.9,1.2]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common.cluster import TopicCounter, start_feed, start_pipeline
from bench.common.report import code_version, foreign_processes, write
from pricing_ha.config import AppConfig
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.tails import exactly_once

INSTRUMENTS = 100
PROBE = "bench.price_path.hop_probe"  # run as a module, from the repository root
WARM_S = 3.0  # a paced step's steady state starts this long after the feed was started


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _foreign() -> int:
    return len(foreign_processes())


def _r(x: float | None, nd: int = 0) -> float | None:
    return None if x is None else round(x, nd)


def unpaced(bootstrap: str, n: int, members: int) -> dict[str, Any]:
    """Feed N quotes unpaced into a fresh pipeline; how fast does ``prices`` grow?"""
    workdir = Path(tempfile.mkdtemp(prefix="bench-e2e-unpaced-"))
    with ProcessGroup(workdir / "logs") as procs:
        began = time.monotonic()
        c = start_pipeline(procs, bootstrap, workdir, members)
        startup_s = time.monotonic() - began
        prices, raw = c.topics["prices"], c.topics["raw"]
        counter = TopicCounter(bootstrap, [prices, raw], c.partitions)
        try:
            load_before = _load()
            t0 = time.monotonic()
            feed = start_feed(c, instruments=INSTRUMENTS, rate_hz=0, count=n)
            assert feed.wait(300) == 0, feed.log_tail()
            feed_end = time.monotonic()
            complete = counter.wait_for(prices, n, timeout_s=300, stall_s=20)
            counter.wait_for(raw, 2 * n, timeout_s=30, stall_s=5)
            load_after = _load()
        finally:
            counter.close()
        at_feed_end = counter.count_at(prices, feed_end)
        after_feed = None
        if at_feed_end < 0.8 * n:
            after_feed = counter.rate(prices, max(at_feed_end, 0.1 * n) + 1, 0.9 * n)
        first, last = counter.reached(prices, 1), counter.reached(prices, n)
        out: dict[str, Any] = {
            "quotes": n,
            "instruments": INSTRUMENTS,
            "pipeline_startup_s": round(startup_s, 1),
            "load_average_1m_before": load_before,
            "load_average_1m_after": load_after,
            "foreign_processes_after": _foreign(),
            "feed_s": round(feed_end - t0, 2),
            "feed_quotes_per_s_incl_startup": round(n / (feed_end - t0)),
            "complete": complete,
            "prices_counted": counter.counts[prices],
            "prices_raw_counted": counter.counts[raw],
            "prices_per_s_10_90": _r(counter.rate(prices, 0.1 * n, 0.9 * n)),
            "prices_per_s_after_feed_exit": _r(after_feed),
            "prices_at_feed_exit": at_feed_end,
            "raw_records_per_s_10_90": _r(counter.rate(raw, 0.2 * n, 1.8 * n)),
            "first_to_last_price_s": _r(last - first, 2) if first and last else None,
            "feed_start_to_last_price_s": _r(last - t0, 2) if last else None,
        }
        print(f"  unpaced: {json.dumps(out)}", flush=True)
        # Judged after up to 60 s more: a run that gave up counting (stall_s) before the
        # pipeline drained used to be judged at once, which could not tell a late price from
        # a lost one (an earlier committed run: "complete": false, 18 missing).
        out["exactly_once"] = exactly_once(c, wait_s=60)
        print(f"  unpaced exactly-once: {out['exactly_once']}", flush=True)
    return out


def paced(bootstrap: str, total_rate: float, step_s: float, members: int) -> dict[str, Any]:
    """Feed ``total_rate`` quotes/s for ``step_s`` into a fresh pipeline; does prices keep up?"""
    workdir = Path(tempfile.mkdtemp(prefix="bench-e2e-paced-"))
    n = int(total_rate * step_s)
    with ProcessGroup(workdir / "logs") as procs:
        c = start_pipeline(procs, bootstrap, workdir, members)
        prices, quotes = c.topics["prices"], c.topics["quotes"]
        counter = TopicCounter(bootstrap, [prices, quotes], c.partitions)
        try:
            load_before = _load()
            t0 = time.monotonic()
            feed = start_feed(c, instruments=INSTRUMENTS, rate_hz=total_rate / INSTRUMENTS, count=n)
            assert feed.wait(step_s + 120) == 0, feed.log_tail()
            feed_end = time.monotonic()
            complete = counter.wait_for(prices, n, timeout_s=120, stall_s=15)
            load_after = _load()
        finally:
            counter.close()
        # Steady state: from WARM_S after the feed was started to its exit, prices' growth
        # against md.quotes' growth (what the feed really sent: it may fall behind its schedule).
        lo_t = t0 + WARM_S
        span = feed_end - lo_t
        grew = counter.count_at(prices, feed_end) - counter.count_at(prices, lo_t)
        sent = counter.count_at(quotes, feed_end) - counter.count_at(quotes, lo_t)
        done = counter.reached(prices, n)
        drain = None if done is None else max(0.0, done - feed_end)
        behind = n - counter.count_at(prices, feed_end)
        out = {
            "offered_per_s": total_rate,
            "quotes": n,
            "feed_s": round(feed_end - t0, 2),
            "quotes_per_s_steady": round(sent / span),
            "prices_per_s_steady": round(grew / span),
            "prices_per_s_20_80": _r(counter.rate(prices, 0.2 * n, 0.8 * n)),
            "behind_at_feed_exit": behind,
            "drain_after_feed_exit_s": _r(drain, 2),
            "complete": complete,
            "sustained": bool(
                grew >= 0.95 * sent
                and behind <= 0.5 * total_rate
                and drain is not None
                and drain <= 1
            ),
            "load_average_1m_before": load_before,
            "load_average_1m_after": load_after,
            "foreign_processes_after": _foreign(),
        }
        print(f"  paced {total_rate:.0f}/s: {json.dumps(out)}", flush=True)
    return out


def _subscriber_figures(path: Path, measure_s: float) -> dict[str, Any]:
    s = json.loads(path.read_text())
    keys = ("delivered", "gaps", "duplicates", "copies_dropped", "out_of_order", "invalid")
    out: dict[str, Any] = {k: s[k] for k in keys}
    out["delivered_per_s"] = round(s["delivered"] / measure_s)
    out["max_silence_ms"] = round(s["max_silence_s"] * 1000, 1)
    out["source_to_receive"] = s["latency"]["source_to_receive"]
    out["publish_to_receive"] = s["latency"]["publish_to_receive"]
    return out


def latency(
    bootstrap: str, hz: float, measure_s: float, members: int, linger_ms: int
) -> dict[str, Any]:
    """Subscriber latency (relay and direct, side by side) at 100 x ``hz``, with the reference."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-e2e-latency-"))
    total = INSTRUMENTS * hz
    out: dict[str, Any] = {"total_rate_per_s": total, "instruments": INSTRUMENTS, "hz": hz}
    with ProcessGroup(workdir / "logs") as procs:
        c = start_pipeline(procs, bootstrap, workdir, members)
        probe_topic = f"bench-hop-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
        admin.create_topics([NewTopic(probe_topic, c.partitions, 1)])[probe_topic].result(15)
        feed = start_feed(c, instruments=INSTRUMENTS, rate_hz=hz, duration_s=measure_s + 60)
        time.sleep(3.0)  # steady state
        py = sys.executable
        probe_out = workdir / "hop.json"
        cons = procs.spawn(
            "hop-consume",
            [py, "-m", PROBE, "consume", bootstrap, probe_topic, str(c.partitions),
             str(measure_s + 15), str(probe_out)],
        )  # fmt: skip
        time.sleep(1.0)
        load_before = _load()
        prod = procs.spawn(
            "hop-produce",
            [py, "-m", PROBE, "produce", bootstrap, probe_topic, str(total), str(measure_s),
             str(linger_ms)],
        )  # fmt: skip
        subs = {
            mode: c.cli(
                f"subscribe-{mode}",
                "subscribe",
                f"--duration={measure_s:g}",
                f"--summary-out={workdir / f'sub-{mode}.json'}",
                *(["--direct"] if mode == "direct" else []),
            )
            for mode in ("relay", "direct")
        }
        for sub in subs.values():
            assert sub.wait(measure_s + 60) == 0, sub.log_tail()
        assert prod.wait(60) == 0, prod.log_tail()
        assert cons.wait(60) == 0, cons.log_tail()
        out["load_average_1m_before"] = load_before
        out["load_average_1m_after"] = _load()
        out["foreign_processes_after"] = _foreign()
        for mode in subs:
            out[mode] = _subscriber_figures(workdir / f"sub-{mode}.json", measure_s)
            print(f"  {total:.0f}/s {mode}: {out[mode]['source_to_receive']}", flush=True)
        out["broker_single_hop"] = json.loads(probe_out.read_text())
        print(f"  {total:.0f}/s one hop: {out['broker_single_hop']}", flush=True)
        feed.terminate()
        feed.wait(60)
    return out


def main() -> None:
    """Run the throughput and latency cases; write bench/results/end_to_end.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1, help="publishers per group")
    parser.add_argument("--count", type=int, default=100_000, help="quotes of the unpaced run")
    parser.add_argument("--step-s", type=float, default=10.0, help="length of a paced step")
    parser.add_argument("--ladder", default="0.6,0.9,1.2", help="fractions of unpaced")
    parser.add_argument("--latency-hz", default="10,50", help="per instrument, 100 instruments")
    parser.add_argument("--measure-s", type=float, default=15.0)
    parser.add_argument("--probe-linger-ms", type=int, default=1)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    # SIGTERM unwinds (stopping every process started) instead of killing this process alone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    defaults = AppConfig()
    began = time.monotonic()
    figures: dict[str, Any] = {
        "setup": {
            "broker": "local Apache Kafka (LocalKafka), one node",
            "publishers_per_group": args.members,
            "groups": ["p1", "p2"],
            "relays": 2,
            "partitions": 4,
            "instruments": INSTRUMENTS,
            "neli_session_ms": PricingCluster.__dataclass_fields__["session_ms"].default,
            "relay_session_ms": defaults.relay.session_timeout_ms,
            "relay_threshold_ms": defaults.relay.threshold_ms,
            "relay_reorder_window_ms": defaults.relay.reorder_window_ms,
            "probe_producer": {"linger.ms": args.probe_linger_ms, "acks": "all", "idempotent": 1},
            "probe_consumer": {"fetch.wait.max.ms": 10},
            "note": "all processes share the machine's cores",
            "code": code_version(),
            "foreign_processes_at_start": foreign_processes(),
        }
    }
    # Child processes write relative paths (e.g. telemetry traces) here, not in the repository.
    os.chdir(tempfile.mkdtemp(prefix="bench-e2e-cwd-"))
    with LocalKafka() as broker:
        if not args.skip_throughput:
            print("throughput, unpaced", flush=True)
            up = unpaced(broker.bootstrap, args.count, args.members)
            base = up["prices_per_s_10_90"] or 2000.0
            steps = []
            for f in (float(x) for x in args.ladder.split(",")):
                rate = max(100.0, round(base * f, -2))
                print(f"throughput, paced at {rate:.0f}/s", flush=True)
                steps.append(paced(broker.bootstrap, rate, args.step_s, args.members))
            held = [s["offered_per_s"] for s in steps if s["sustained"]]
            figures["throughput"] = {
                "unpaced": up,
                "paced": steps,
                "highest_sustained_paced_per_s": max(held) if held else None,
            }
        if not args.skip_latency:
            figures["latency"] = {
                "measure_s": args.measure_s,
                "note": (
                    "source_to_receive starts at the quote's source_time_ns, which the feed "
                    "stamps before its pacing wait, so it includes up to one feed interval "
                    "(1 / total rate: 1 ms at 1000/s, 0.2 ms at 5000/s)"
                ),
            }
            for hz in (float(x) for x in args.latency_hz.split(",")):
                print(f"latency at {INSTRUMENTS * hz:.0f}/s", flush=True)
                figures["latency"][f"{INSTRUMENTS * hz:.0f}_per_s"] = latency(
                    broker.bootstrap, hz, args.measure_s, args.members, args.probe_linger_ms
                )
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    write("end_to_end", figures)


if __name__ == "__main__":
    main()
