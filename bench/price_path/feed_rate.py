"""The feed is not the bottleneck: ``pricing-ha feed`` paced at a ladder of rates, on one core.

One local Apache Kafka node. Each step is a fresh :class:`~pricing_ha.local.cluster.PricingCluster`
(``pricing-ha topics create``: ``md.quotes`` as the product configures it, ``--partitions``) and
the product's own feed (``pricing-ha feed``, ``--instruments`` instruments, the rate split evenly
over them) sending R * ``--step-s`` quotes, for each R of ``--rates``; then the same feed
unpaced (``--rate 0``) with as many quotes as the largest step, and the reference: a bare
confluent-kafka producer loop (:mod:`bench.price_path.bare_producer`) in a child process, the
same number of records of the same sizes and keys, the feed's producer settings, unpaced, on a
fresh topic of its own made the same way.

Figures per step (:mod:`bench.price_path.feed_pace`): records landed, counted from the broker's
high watermarks (not by reading the topic back, which would take CPU from the process measured),
sampled with the process's CPU (``/proc``, :mod:`bench.common.procstat`) every
``--interval-s``; the delivered rate in the steady window; the pace (achieved / offered) and how
far behind its schedule the last quote landed; the process's CPU per quote and share of one core,
and its busiest threads (``rdk:*`` are librdkafka's). A step *paces* R if it achieved >= 95 % of
R with its last quote at most 0.5 s late; the goal is 50,000 quotes/s paced within one core.

Run: ``.venv/bin/python -m bench.price_path.feed_rate [--rates 20000,35000,50000,65000]
[--step-s 20] [--instruments 100] [--partitions 4] [--smoke]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bench.common.cluster import start_feed
from bench.common.procstat import Periodic, cpu_s, load, memory_kib, thread_cpu_s
from bench.common.report import code_version, foreign_processes, write
from bench.price_path.feed_pace import Sample, headline, step_figures
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.procs import Proc, ProcessGroup

GOAL_PER_S = 50_000.0
BARE = "bench.price_path.bare_producer"


class Watch(Periodic):
    """Samples a topic's record count (high watermarks) and a process's CPU (and its threads'),
    in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval_s: float) -> None:
        """Start sampling ``topic``; :meth:`watch` adds the process to measure."""
        self.samples: list[Sample] = []
        self.memory_kib: dict[str, int] = {}
        self._pid: tuple[str, int] | None = None
        self._parts = [TopicPartition(topic, p) for p in range(partitions)]
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-feed-rate", "log_level": 4}
        )
        super().__init__(interval_s, "bench-watch")

    def watch(self, name: str, pid: int) -> None:
        """Sample this process's CPU (and its threads', and its memory) from now on."""
        self._pid = (name, pid)

    def _records(self) -> int | None:
        try:
            return sum(
                self._consumer.get_watermark_offsets(tp, timeout=2, cached=False)[1]
                for tp in self._parts
            )
        except KafkaException:
            return None

    def sample(self) -> None:
        """Take one sample now."""
        records = self._records()
        if records is None:
            return
        t = time.monotonic()
        cpu: dict[str, float] = {}
        threads: dict[str, float] = {}
        if self._pid is not None:
            name, pid = self._pid
            try:
                cpu[name] = cpu_s(pid)
                threads = thread_cpu_s(pid)
                self.memory_kib = memory_kib(pid)
            except (OSError, ValueError, IndexError):
                cpu, threads = {}, {}  # exited
        self.samples.append(Sample(t, records, cpu, threads))

    def close(self) -> None:
        """Take a last sample, then stop and close the topic's reader."""
        super().close()
        self._consumer.close()


def _fresh_topic(
    procs: ProcessGroup, bootstrap: str, workdir: Path, partitions: int
) -> PricingCluster:
    cluster = PricingCluster(procs, bootstrap, workdir, partitions=partitions)
    cluster.create_topics()
    return cluster


def _run_step(
    args: argparse.Namespace,
    bootstrap: str,
    workdir: Path,
    *,
    label: str,
    rate: float | None,
    n: int,
) -> dict[str, Any]:
    """One step: the feed at ``rate`` (None: unpaced), or the bare loop (``label == 'bare'``)."""
    workdir.mkdir(parents=True)
    with ProcessGroup(workdir / "logs") as procs:
        cluster = _fresh_topic(procs, bootstrap, workdir, args.partitions)
        watch = Watch(bootstrap, cluster.topics["quotes"], args.partitions, args.interval_s)
        try:
            load_before = load()
            started = time.monotonic()
            proc: Proc
            if label == "bare":
                proc = procs.spawn(
                    "bare",
                    [sys.executable, "-m", BARE, str(cluster.config_path), str(n),
                     str(args.instruments)],
                )  # fmt: skip
            else:
                per_instrument = (rate or 0.0) / args.instruments
                proc = start_feed(
                    cluster, instruments=args.instruments, rate_hz=per_instrument, count=n
                )
            watch.watch(label, proc.pid)
            code = proc.wait(n / (rate or 5_000) + 180)
            assert code == 0, proc.log_tail()
            load_after = load()
        finally:
            watch.close()
    out = step_figures(
        watch.samples,
        n=n,
        offered_per_s=rate,
        started=started,
        warm_s=args.warm_s,
        process=label,
    )
    out |= {
        "process": label,
        "instruments": args.instruments,
        "partitions": args.partitions,
        "vm_hwm_mib": round(watch.memory_kib.get("VmHWM", 0) / 1024, 1) or None,
        "load_average_1m_before": load_before,
        "load_average_1m_after": load_after,
        "foreign_processes_after": len(foreign_processes()),
    }
    log_lines = proc.log_path.read_text(errors="replace").strip().splitlines()
    if label == "bare":
        out["bare_loop"] = json.loads(log_lines[-1])
    else:
        summary = cluster.feed_summary()
        out["feed_summary"] = {
            k: summary.get(k) for k in ("produced", "delivered", "failed", "producer_replacements")
        }
    print(f"  {label} {rate or 'unpaced'}: {json.dumps(_brief(out))}", flush=True)
    return out


def _brief(step: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "delivered_per_s",
        "achieved_over_offered",
        "behind_schedule_at_end_s",
        "paced",
        "within_one_core",
    )
    cpu = step.get("cpu", {})
    return {k: step.get(k) for k in keys} | {
        "cpu_us_per_quote": cpu.get("cpu_us_per_record"),
        "cpu_percent_of_a_core": cpu.get("cpu_percent_of_a_core"),
    }


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rates", default="20000,35000,50000,65000", help="quotes/s, total")
    parser.add_argument("--step-s", type=float, default=20.0, help="length of a paced step")
    parser.add_argument("--instruments", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--warm-s", type=float, default=2.0, help="left out of each window")
    parser.add_argument("--interval-s", type=float, default=0.1, help="sampling interval")
    parser.add_argument("--skip-reference", action="store_true", help="no unpaced runs")
    parser.add_argument("--name", default="feed_rate", help="results: bench/results/NAME.json")
    parser.add_argument("--smoke", action="store_true", help="two 2 s steps at low rates")
    args = parser.parse_args()
    if args.smoke:
        args.rates, args.step_s, args.warm_s = "2000,4000", 2.0, 0.5
    return args


def main() -> None:
    """Run the ladder and the unpaced pair; print and write bench/results/feed_rate.json."""
    args = _options()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop what was started
    began = time.monotonic()
    load_at_start = load()
    if load_at_start > 1.0:
        print(f"WARNING: load average {load_at_start} > 1.0 at the start: figures are loaded")
    rates = [float(x) for x in args.rates.split(",") if x]
    figures: dict[str, Any] = {
        "loaded": load_at_start > 1.0,
        "load_average_1m_at_start": load_at_start,
        "setup": {
            "broker": "local Apache Kafka (LocalKafka), one node",
            "feed": "pricing-ha feed (its own producer settings), one process",
            "reference": f"{BARE}: produce + poll(0) loop, same records, same settings",
            "delivered_counted_from": "sum of the topic's high watermarks, sampled",
            "options": vars(args),
            "code": code_version(),
            "foreign_processes_at_start": foreign_processes(),
        },
    }
    root = Path(tempfile.mkdtemp(prefix="bench-feed-rate-"))
    os.chdir(root)  # the feed's relative paths (telemetry files) land here
    steps: list[dict[str, Any]] = []
    with LocalKafka() as broker:
        for i, rate in enumerate(rates):
            n = int(rate * args.step_s)
            steps.append(
                _run_step(args, broker.bootstrap, root / f"{i:02d}-feed-{rate:.0f}",
                          label="feed", rate=rate, n=n)
            )  # fmt: skip
        if not args.skip_reference:
            n = int(max(rates) * args.step_s)
            unpaced = _run_step(
                args, broker.bootstrap, root / "feed-unpaced", label="feed", rate=None, n=n
            )
            bare = _run_step(args, broker.bootstrap, root / "bare", label="bare", rate=None, n=n)
            figures["unpaced"] = {
                "feed": unpaced,
                "bare_producer": bare,
                "feed_over_bare_rate": _ratio(
                    unpaced.get("delivered_per_s"), bare.get("delivered_per_s")
                ),
                "feed_over_bare_cpu_per_quote": _ratio(
                    unpaced.get("cpu", {}).get("cpu_us_per_record"),
                    bare.get("cpu", {}).get("cpu_us_per_record"),
                ),
            }
    figures["steps"] = steps
    figures |= headline(steps, GOAL_PER_S)
    figures["load_average_1m_at_end"] = load()
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    write(args.name, figures, smoke="--smoke" if args.smoke else None)
    _print_table([*steps, *(figures.get("unpaced", {}).get(k) for k in ("feed", "bare_producer"))])
    print(
        f"highest rate paced within one core: {figures['highest_paced_on_one_core_per_s']} "
        f"(goal {GOAL_PER_S:.0f}: {'met' if figures['goal_met'] else 'NOT met'})"
    )


def _print_table(rows: list[dict[str, Any] | None]) -> None:
    print(
        f"{'step':>12} {'delivered/s':>11} {'pace':>6} {'late s':>7} {'µs/quote':>9} {'% core':>7}"
    )
    for s in rows:
        if not s:
            continue
        b = {k: "-" if v is None else v for k, v in _brief(s).items()}
        label = f"{s['offered_per_s']:.0f}/s" if s["offered_per_s"] else f"{s['process']} max"
        print(
            f"{label:>12} {b['delivered_per_s']:>11} {b['achieved_over_offered']:>6} "
            f"{b['behind_schedule_at_end_s']:>7} {b['cpu_us_per_quote']:>9} "
            f"{b['cpu_percent_of_a_core']:>7}"
        )


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


if __name__ == "__main__":
    main()
