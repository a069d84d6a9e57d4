"""Flame graphs of the price path under load: a publisher and a relay, sampled by py-spy.

One pipeline (:func:`bench.common.cluster.start_pipeline`: P1 and P2 with one member each, relays r1
and r2) on a local Apache Kafka; the synthetic feed runs paced at ``--rate`` prices/s (100
instruments) and, after ``--warm-s``, ``py-spy record`` samples publisher ``p1/a`` and every relay
for ``--seconds`` (on-CPU samples only: idle waits are left out, so the width of a frame is the
share of CPU time spent in it). The SVGs go to ``bench/results/flame-LABEL-ROLE.svg`` and a short
JSON of the run (rate, CPU seconds per process over the sampled window, prices delivered) to
``bench/results/flame-LABEL.json``.

py-spy is not a dependency of the project: ``.venv/bin/pip install py-spy`` first.

Run: ``.venv/bin/python -m bench.price_path.flame --label before [--rate 5000]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common.cluster import TopicCounter, start_feed, start_pipeline
from bench.common.procstat import cpu_s, thread_cpu_s
from bench.common.report import RESULTS, code_version, foreign_processes, machine
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.procs import ProcessGroup

INSTRUMENTS = 100


def _diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    spent = {k: round(v - before.get(k, 0.0), 2) for k, v in after.items()}
    return dict(sorted(((k, v) for k, v in spent.items() if v >= 0.05), key=lambda kv: -kv[1]))


def main() -> None:
    """Profile one loaded pipeline; write the flame graphs and a JSON summary."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True, help="e.g. before / after")
    parser.add_argument("--rate", type=float, default=5000.0, help="total prices per second")
    parser.add_argument("--warm-s", type=float, default=8.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.chdir(tempfile.mkdtemp(prefix="bench-profile-cwd-"))
    load_before = os.getloadavg()[0]
    out: dict[str, object] = {
        "label": args.label,
        "rate_per_s": args.rate,
        "instruments": INSTRUMENTS,
        "seconds": args.seconds,
        "load_average_1m_before": round(load_before, 2),
        "foreign_processes": foreign_processes(),
        "code": code_version(),
    }
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    with LocalKafka() as broker, ProcessGroup(work / "logs") as procs:
        cluster = start_pipeline(procs, broker.bootstrap, work)
        prices = cluster.topics["prices"]
        counter = TopicCounter(broker.bootstrap, [prices], cluster.partitions)
        hz = args.rate / INSTRUMENTS
        feed = start_feed(
            cluster, instruments=INSTRUMENTS, rate_hz=hz, duration_s=args.warm_s + args.seconds + 60
        )
        time.sleep(args.warm_s)
        targets = {
            "publisher": cluster.members["p1-a"],
            **{f"relay-{r}": cluster.members[f"relay-{r}"] for r in ("r1", "r2")},
        }
        others = {
            "broker": broker.pid,
            "feed": feed.pid,
            "publisher-p2": cluster.members["p2-a"].pid,
        }
        cpu0 = {role: cpu_s(proc.pid) for role, proc in targets.items()}
        others0 = {role: cpu_s(pid) for role, pid in others.items()}
        threads0 = {role: thread_cpu_s(proc.pid) for role, proc in targets.items()}
        n0, t0 = counter.counts[prices], time.monotonic()
        spies = [
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(proc.pid),
                    "--duration",
                    str(int(args.seconds)),
                    "--rate",
                    "200",
                    "--output",
                    str(RESULTS / f"flame-{args.label}-{role}.svg"),
                    "--nonblocking",
                    "--threads",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for role, proc in targets.items()
        ]
        for s in spies:
            s.wait(args.seconds + 60)
        elapsed = time.monotonic() - t0
        delivered = counter.counts[prices] - n0
        cpu = {role: cpu_s(proc.pid) - cpu0[role] for role, proc in targets.items()}
        out["other_cpu_s"] = {k: round(cpu_s(pid) - others0[k], 2) for k, pid in others.items()}
        out["thread_cpu_s"] = {
            role: _diff(thread_cpu_s(proc.pid), threads0[role]) for role, proc in targets.items()
        }
        out["prices_in_window"] = delivered
        out["prices_per_s_in_window"] = round(delivered / elapsed)
        out["cpu_s"] = {k: round(v, 2) for k, v in cpu.items()}
        out["cpu_us_per_price"] = {k: round(v / max(1, delivered) * 1e6, 1) for k, v in cpu.items()}
        out["load_average_1m_after"] = round(os.getloadavg()[0], 2)
        feed.wait(args.seconds + 60)
        counter.close()
    out["machine"] = machine()
    path = RESULTS / f"flame-{args.label}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
