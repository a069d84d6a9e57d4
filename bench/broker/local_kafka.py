"""The local Apache Kafka's own cost: start-up time, idle CPU and memory per node.

Method: for one node, then three (racks a/b/c), a fresh :class:`LocalKafka` in a temporary
directory is started (format + JVM start until metadata names every node: ``startup_s``), left
alone for ``--settle`` seconds (the controller's first metadata writes, JIT), then each node's
CPU (``/proc/<pid>/stat``) is read over ``--window`` seconds with no client connected, and its
resident memory at the end. ``--repeat`` starts per size give the start-up spread. The
one-node cluster is the reference for the three-node one (same run, same machine).

Run alone: ``.venv/bin/python -m bench.broker.local_kafka`` (writes bench/results/local_kafka.json).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from bench.common.procstat import cpu_s, load, memory_kib
from bench.common.report import code_version, foreign_processes, summary, write
from pricing_ha.local.broker import LocalKafka


def _measure(nodes: int, settle_s: float, window_s: float) -> dict[str, Any]:
    with TemporaryDirectory(prefix="bench-kafka-") as tmp:
        kafka = LocalKafka(nodes=nodes, workdir=Path(tmp) / "kafka")
        with kafka:
            assert kafka.startup_s is not None
            time.sleep(settle_s)
            pids = kafka.pids
            before = [cpu_s(p) for p in pids]
            began = time.monotonic()
            time.sleep(window_s)
            spent = [cpu_s(p) - b for p, b in zip(pids, before, strict=True)]
            elapsed = time.monotonic() - began
            rss = [memory_kib(p)["VmRSS"] / 1024 for p in pids]
        return {
            "startup_s": round(kafka.startup_s, 3),
            "idle_cpu_pct_per_node": [round(100 * s / elapsed, 2) for s in spent],
            "rss_mib_per_node": [round(r, 1) for r in rss],
        }


def main() -> None:
    """Measure and write bench/results/local_kafka.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="starts per cluster size")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before measuring")
    parser.add_argument("--window", type=float, default=30.0, help="seconds of idle CPU")
    args = parser.parse_args()
    figures: dict[str, Any] = {
        "code": code_version(),
        "load_before": load(),
        "foreign_processes": foreign_processes(),
        "method": {"settle_s": args.settle, "window_s": args.window, "repeat": args.repeat},
    }
    for nodes in (1, 3):
        runs = [_measure(nodes, args.settle, args.window) for _ in range(args.repeat)]
        idle = [c for r in runs for c in r["idle_cpu_pct_per_node"]]
        rss = [m for r in runs for m in r["rss_mib_per_node"]]
        figures[f"nodes_{nodes}"] = {
            "startup_s": summary([r["startup_s"] for r in runs]),
            "idle_cpu_pct_per_node": summary(idle),
            "rss_mib_per_node": summary(rss),
            "runs": runs,
        }
    figures["load_after"] = load()
    one, three = figures["nodes_1"], figures["nodes_3"]
    figures["three_against_one"] = {
        "startup": round(three["startup_s"]["median"] / one["startup_s"]["median"], 2),
        "idle_cpu_per_node": round(
            three["idle_cpu_pct_per_node"]["median"] / one["idle_cpu_pct_per_node"]["median"], 2
        ),
    }
    write("local_kafka", figures)


if __name__ == "__main__":
    main()
