"""Overhead of price-path tracing on end-to-end throughput, at sampling 0, 1 % and 100 %.

For each ratio, in the same run and on the same local Apache Kafka: fresh topics, one P1 publisher
member and one relay member (``pricing-ha run`` / ``pricing-ha dedupe``, separate OS processes,
spans to JSON-lines files), all started with ``PRICING_HA__TELEMETRY__PRICE_SAMPLE_RATIO`` set.
Once both lead every partition, the feed produces N quotes unpaced (``--rate 0``), sampled at the
same ratio, and the benchmark consumes ``prices`` until all N have arrived. Figures:

* ``steady_prices_per_s``: prices per second between the 10th and the 90th percentile of the
  ``relay_ns`` headers on ``prices`` (when the relay emitted them): the rate at which the
  pipeline delivered once running, ramp-up and tail excluded (the feed outruns the pipeline);
* ``end_to_end_prices_per_s``: N / (last price seen - feed spawned), start-up included;
* ``spawn_to_first_price_s``: feed process spawned to the first price on ``prices``;
* ``cpu_us_per_price``: CPU time (user + system, from ``/proc``) the publisher and the relay
  processes spent from the moment they led until the last price arrived, per price. This is
  the cost of tracing itself, much less sensitive than the rates to other work competing for
  the machine's cores;
* ``spans_written``: lines in the span files (leadership spans included); at 100 % the
  exporters' queues may drop spans under this load, which the figure shows.

The ratios run in rounds, in the order 0, 1 %, 100 %, then in reverse, and so on (``--rounds``,
default 3); each figure is the median of its runs, so that a drift of the machine's load does
not favour one ratio. At 100 % the
pipeline is an order of magnitude slower, so it is fed N / 10 quotes (its rate is still taken
over thousands of prices) to keep the whole benchmark within a few minutes. Ratios to
sampling 0 are printed and written with the figures to bench/results/tracing_overhead.json.

Run: ``.venv/bin/python -m bench.telemetry [--quotes 40000] [--instruments 50]
[--rounds 3]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Message

from bench.common.procstat import cpu_s
from bench.common.report import write
from pricing_ha.kafka.headers import header_dict
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.tails import TopicTail
from pricing_ha.local.waiting import wait_until

RATIOS = (0.0, 0.01, 1.0)
CASE_TIMEOUT_S = 90.0


def _count_prices(cluster: PricingCluster, n: int, deadline: float) -> dict[str, Any]:
    """Consume ``prices`` until ``n`` records arrived (or the deadline): times and relay_ns."""
    relay_ns: list[int] = []
    seen: list[float] = []  # when the first and the latest records arrived

    def keep(batch: list[Message], received: float) -> None:
        relay_ns.extend(int(header_dict(msg.headers())["relay_ns"]) for msg in batch)
        if batch:
            seen[:] = [seen[0] if seen else received, received]

    tail = TopicTail(cluster.bootstrap, [cluster.topics["prices"]], cluster.partitions, keep)
    try:
        wait_until(lambda: len(relay_ns) >= n, deadline - time.monotonic(), poll_s=0.05)
    finally:
        tail.close()
    first_seen, last_seen = seen or (None, None)
    return {"relay_ns": sorted(relay_ns), "first_seen": first_seen, "last_seen": last_seen}


def _spans_written(directory: Path) -> int:
    return sum(
        sum(1 for _ in path.open("rb")) for path in directory.glob("*.jsonl") if path.is_file()
    )


def run_case(
    bootstrap: str, workdir: Path, ratio: float, n: int, instruments: int
) -> dict[str, Any]:
    """One pipeline at ``ratio``: P1 (1 member) and a relay, then N unpaced quotes."""
    traces = workdir / "traces"
    with ProcessGroup(workdir / "logs") as procs:
        cluster = PricingCluster(procs, bootstrap, workdir)
        cluster.env.update(
            {
                "PRICING_HA__TELEMETRY__PRICE_SAMPLE_RATIO": f"{ratio:g}",
                "PRICING_HA__TELEMETRY__TRACES_DIR": str(traces),
                "OTEL_SDK_DISABLED": "false",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "",
            }
        )
        cluster.create_topics()
        workers = {"publisher": cluster.publisher("p1", "a"), "relay": cluster.relay("r1")}
        cluster.wait_led(["p1", "relay"])
        cpu0 = {name: cpu_s(proc.pid) for name, proc in workers.items()}
        spawned = time.monotonic()
        feed = cluster.cli(
            "feed",
            "feed",
            "--rate=0",
            f"--count={n}",
            f"--instruments={instruments}",
            f"--summary-out={workdir / f'feed-{cluster.uid}.json'}",
        )
        got = _count_prices(cluster, n, spawned + CASE_TIMEOUT_S)
        cpu = {name: cpu_s(proc.pid) - cpu0[name] for name, proc in workers.items()}
        assert feed.wait(60) == 0, feed.log_tail()
        for proc in list(cluster.members.values()):
            proc.stop()
    times = got["relay_ns"]
    out: dict[str, Any] = {"ratio": ratio, "quotes": n, "prices": len(times)}
    out["complete"] = len(times) >= n
    lo, hi = len(times) // 10, (9 * len(times)) // 10
    if hi - lo > 1 and times[hi] > times[lo]:
        out["steady_prices_per_s"] = round((hi - lo) / ((times[hi] - times[lo]) / 1e9))
        out["end_to_end_prices_per_s"] = round(len(times) / (got["last_seen"] - spawned))
        out["spawn_to_first_price_s"] = round(got["first_seen"] - spawned, 2)
    out["cpu_us_per_price"] = {k: round(v / max(1, len(times)) * 1e6, 1) for k, v in cpu.items()}
    out["spans_written"] = _spans_written(traces)
    print(f"  ratio {ratio:g}: {out}", flush=True)
    return out


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return round(statistics.median(values), 1) if values else None


def main() -> None:
    """Run every ratio ``--rounds`` times (alternating the order), write the JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quotes", type=int, default=40_000)
    parser.add_argument("--instruments", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    figures: dict[str, Any] = {
        "quotes": args.quotes,
        "instruments": args.instruments,
        "load_average_1m_before": round(os.getloadavg()[0], 2),
    }
    runs: dict[float, list[dict[str, Any]]] = {r: [] for r in RATIOS}
    with LocalKafka() as broker:
        order = [r for k in range(args.rounds) for r in (RATIOS if k % 2 == 0 else RATIOS[::-1])]
        for i, ratio in enumerate(order):
            print(f"run {i + 1}/{len(order)}: sampling {ratio:g}", flush=True)
            workdir = root / f"run{i}-{ratio:g}"
            workdir.mkdir()
            n = args.quotes if ratio < 1 else max(1000, args.quotes // 10)
            runs[ratio].append(run_case(broker.bootstrap, workdir, ratio, n, args.instruments))
    cases: dict[str, Any] = {}
    for ratio, results in runs.items():
        cases[f"{ratio:g}"] = {
            "runs": results,
            "steady_prices_per_s": _median(results, "steady_prices_per_s"),
            "end_to_end_prices_per_s": _median(results, "end_to_end_prices_per_s"),
            "cpu_us_per_price": {
                role: _median([r["cpu_us_per_price"] for r in results], role)
                for role in ("publisher", "relay")
            },
        }
    figures["cases"] = cases
    base = cases["0"]
    ratios: dict[str, Any] = {}
    for key in ("0.01", "1"):
        ratios[key] = {
            metric: round(cases[key][metric] / base[metric], 3)
            for metric in ("steady_prices_per_s", "end_to_end_prices_per_s")
            if cases[key][metric] and base[metric]
        }
    figures["throughput_ratio_to_sampling_0"] = ratios
    cpu_ratios = {
        key: {
            role: round(cases[key]["cpu_us_per_price"][role] / base["cpu_us_per_price"][role], 2)
            for role in ("publisher", "relay")
        }
        for key in ("0.01", "1")
    }
    figures["cpu_per_price_ratio_to_sampling_0"] = cpu_ratios
    print("relative to sampling 0 (medians):")
    for key, r in ratios.items():
        c = cpu_ratios[key]
        print(
            f"  sampling {float(key):.0%}: steady throughput x{r.get('steady_prices_per_s')}, "
            f"end-to-end x{r.get('end_to_end_prices_per_s')}; CPU per price: publisher "
            f"x{c['publisher']}, relay x{c['relay']}"
        )
    figures["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    figures["total_runtime_s"] = round(time.monotonic() - began, 1)
    write("tracing_overhead", figures)


if __name__ == "__main__":
    main()
