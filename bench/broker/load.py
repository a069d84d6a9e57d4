"""Where the 2 cores go with no fault at all, and how long the price path is silent then.

Why: the relay takeover benchmark's goal for planned moves is two feed ticks (0.2 s) at the
maximum, and the relay's input is itself silent about that long in the same windows. This
benchmark asks what the machine does without any fault: per process, the CPU of the pipeline
the takeover benchmark runs (one local Kafka node, publishing groups ``p1`` and ``p2`` with one
member each, relays ``r1`` and ``r2``, the feed at 10 Hz per instrument on 4 partitions), and
the longest gap per partition in each 3 s window (the takeover benchmark's baseline) on the
relay's input (``prices.raw``, both groups' copies as one) and on its output (``prices``),
by producer timestamps.

Variants, each on a fresh broker and pipeline: the feed at 1, 20 and 100 instruments (10,
200 and 1,000 prices/s: whether the broker's CPU follows the price rate), and 100 instruments
with the broker confined to one core and every other process to the other (what the pipeline
does when the broker cannot take more than a core; the nearest this machine comes to a
broker on a host of its own).

The reference is the feed's tick, 0.1 s: an instrument's prices are 0.1 s apart, so is a
partition's burst of them, and the takeover benchmark's goal is two ticks.

Run (alone on the machine): ``.venv/bin/python -m bench.broker [--window 45]``
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.cluster import start_feed, start_pipeline
from bench.common.procstat import cpu_s, load
from bench.common.report import code_version, foreign_processes, write
from bench.common.topic_gaps import BASELINE_SUB_S, InputTail, PricesTail, baseline_gaps
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.procs import ProcessGroup

TICK_S = 0.1
SETTLE_S = 5.0


def _window_gaps(stamps: dict[int, list[int]], lo_ms: int, hi_ms: int) -> list[int]:
    """Per partition that has records, the longest gap (ms) in each 3 s sub-window of
    [lo_ms, hi_ms], as the takeover benchmark's baseline takes it (:func:`baseline_gaps`)."""
    out: list[int] = []
    for ts in stamps.values():
        if ts:
            recs = [(0, t, "") for t in sorted(ts)]
            out.extend(round(g * 1000) for g in baseline_gaps(recs, lo_ms, hi_ms))
    return out


def _dist(values: list[int]) -> dict[str, float]:
    """median / p90 / max in seconds, and how many exceed two ticks."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000, 3)

    return {
        "n": len(ordered),
        "median_s": at(0.5),
        "p90_s": at(0.9),
        "max_s": round(ordered[-1] / 1000, 3),
        "over_two_ticks": sum(v > 2 * TICK_S * 1000 for v in ordered),
    }


def run(instruments: int, window_s: float, *, pin_broker: bool) -> dict[str, Any]:
    """One variant on a fresh broker: CPU per process and the gaps, over ``window_s``."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-broker-load-"))
    cores = sorted(os.sched_getaffinity(0))
    if pin_broker:
        os.sched_setaffinity(0, {cores[-1]})  # the broker's threads inherit this
    try:
        with LocalKafka() as broker, ProcessGroup(workdir / "logs") as procs:
            if pin_broker:
                os.sched_setaffinity(0, set(cores[:-1]))  # everything started from here on
            c = start_pipeline(procs, broker.bootstrap, workdir, 1)
            feed = start_feed(c, instruments=instruments, rate_hz=1 / TICK_S, duration_s=3600)
            out_tail = PricesTail(broker.bootstrap, c.topics["prices"], c.partitions, "\0")
            in_tail = InputTail(broker.bootstrap, c.topics["raw"], c.partitions)
            time.sleep(SETTLE_S)
            pids = {"broker": broker.pid, "feed": feed.pid}
            pids.update({name: m.pid for name, m in c.members.items() if m.alive()})
            before = {name: cpu_s(pid) for name, pid in pids.items()}
            load_before = load()
            lo_ms, began = int(time.time() * 1000), time.monotonic()
            time.sleep(window_s)
            hi_ms, took = int(time.time() * 1000), time.monotonic() - began
            cpu = {
                name: round(100 * (cpu_s(pid) - before[name]) / took, 1)
                for name, pid in pids.items()
            }
            prices = {p: [r[1] for r in rs] for p, rs in out_tail.records.items()}
            figures = {
                "instruments": instruments,
                "prices_per_s": round(instruments / TICK_S),
                "broker_on_one_core": pin_broker,
                "window_s": round(took, 1),
                "cpu_percent_of_a_core": cpu,
                "cpu_percent_all": round(sum(cpu.values()), 1),
                "load_average_1m": {"window_start": load_before, "window_end": load()},
                "worst_gap_per_3s_window": {
                    "input_prices_raw": _dist(_window_gaps(in_tail.stamps(), lo_ms, hi_ms)),
                    "output_prices": _dist(_window_gaps(prices, lo_ms, hi_ms)),
                },
            }
            out_tail.close()
            in_tail.close()
            return figures
    finally:
        os.sched_setaffinity(0, set(cores))


def main() -> None:
    """Run the variants; write bench/results/broker_load.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=45.0, help="seconds measured per variant")
    parser.add_argument("--out", type=Path, default=None, help="write here instead")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    setup = {
        "pipeline": "local Apache Kafka, one node; p1 and p2 with one member each; relays r1 and"
        " r2; feed",
        "partitions": 4,
        "tick_s": TICK_S,
        "sub_window_s": BASELINE_SUB_S,
        "settle_s": SETTLE_S,
        "code": code_version(),
        "load_average_1m_at_start": load(),
        "foreign_processes_at_start": foreign_processes(),
    }
    variants = []
    for instruments, pin in ((1, False), (20, False), (100, False), (100, True)):
        label = f"{instruments} instruments" + (", broker on one core" if pin else "")
        print(label, flush=True)
        variants.append(run(instruments, args.window, pin_broker=pin))
    figures: dict[str, Any] = {"setup": setup, "variants": variants}
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    write("broker_load", figures, None if args.out is None else args.out.resolve())


if __name__ == "__main__":
    main()
