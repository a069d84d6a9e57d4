"""The price path against a same-shape reference of trivial forwarders, in the same run.

Product: feed -> ``md.quotes`` -> publishing groups ``p1`` and ``p2`` (one member each) ->
``prices.raw`` -> relays ``r1``, ``r2`` -> ``prices`` (:func:`bench.common.cluster.start_pipeline`).
Reference: the same feed -> ``ref.quotes.<uid>`` -> two forwarding "publishers" ->
``ref.raw.<uid>`` -> one forwarding "relay" (keeps group p1's copies) -> ``ref.prices.<uid>``
(``bench/price_path/forwarder.py``: the product's fetch loop, client settings and commits, minus its
work). Both run on one local Apache Kafka, with the same partition count, each case on fresh
topics and processes (:mod:`bench.price_path.cases`); cases alternate product, reference, product,
reference (``--rounds``), so a drift of the machine's load does not favour one.

Figures, for both:

1. **sustained throughput**: a paced search. Each step feeds R quotes/s (``--instruments``
   instruments x R / instruments Hz) for ``--step-s`` into a fresh path. A step is sustained if the
   output grew by >= 95 % of what the feed sent in the steady window (3 s after the feed started to
   its exit), was at most R / 2 records behind at the feed's exit, drained within 1 s, and the feed
   itself kept its pace (>= 95 % of R from the window's start to its last quote's landing on the
   input topic: otherwise R was not offered). From ``--start-rate`` the rate is multiplied by 1.25
   while steps hold, up to the first failure; if the very first step fails, it is divided by 1.25
   until one holds (``--max-steps`` steps in all). The output of the highest sustained step is then
   checked: the product's ``prices`` exactly once against the feed
   (:func:`pricing_ha.local.tails.exactly_once`), the reference's output as distinct (key, value)
   pairs against the feed's count.
2. **latency** at 100 instruments x ``--latency-hz`` (1,000/s and 5,000/s): source (the feed's
   ``source_time_ns``) -> receive by ``bench.price_path.latency_probe`` on the output topic, over
   ``--measure-s``; p50 / p99 / max.
3. **CPU per price** of every process (publishers / forwarders, relays, broker, feed), from
   ``/proc/<pid>/stat`` over each case's steady window, divided by the prices delivered in it.
4. **memory**: VmRSS and VmHWM of every process at the end of each case.
5. **scale**: the search and memory at each ``--instruments`` x ``--partitions`` combination.

Reading the figures: everything shares the machine's cores, so a path's ceiling is often the
broker's or the feed's CPU, not its own (each case reports every process's share of a core).
The forwarders take little time per batch, so their batches are small (``records_per_batch``
in each reference step) and the broker serves more requests per record for them: its CPU per
price can be higher for the reference than for the product. The feed's own ceiling falls with
many instruments; a step it could not pace fails as "feed behind its schedule", and a search
that ended on such a step says so (``limited_by_feed``).

Headline (the first combination): ``sustained_prices_per_s``, the product's median highest
sustained rate over the rounds, and ``ratio_to_reference``, that over the reference's.

Run: ``.venv/bin/python -m bench.price_path [--rounds 2] [--step-s 30] [--start-rate 4000]
[--instruments 100[,10000,100000]] [--partitions 4[,32]] [--pipelined] [--smoke]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.procstat import load
from bench.common.report import code_version, foreign_processes, write
from bench.price_path.cases import (
    ROLES,
    PathRun,
    check_output,
    drop_topics,
    ladder_step,
    latency_case,
)
from bench.price_path.forwarder import CONSUMER_SETTINGS, producer_settings
from pricing_ha.local.broker import LocalKafka
from pricing_ha.member.worker import BATCH, FIRST_WAIT_S

KINDS = ("product", "reference")
FACTOR = 1.25
LATENCY_INSTRUMENTS = 100


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _median(values: list[float | None], nd: int = 1) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), nd) if kept else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


class Bench:
    """The run's settings and where its cases go."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, broker_pid: int) -> None:
        """Keep the settings; cases get numbered working directories under a temporary root."""
        self.args = args
        self.bootstrap = bootstrap
        self.broker_pid = broker_pid
        self.root = Path(tempfile.mkdtemp(prefix="bench-price-path-"))
        self._cases = 0

    def workdir(self, label: str) -> Path:
        """A fresh working directory for one case."""
        self._cases += 1
        path = self.root / f"{self._cases:03d}-{label}"
        path.mkdir()
        return path

    def search(self, kind: str, instruments: int, partitions: int) -> dict[str, Any]:
        """The highest rate ``kind`` sustains (see the module docstring), and its figures."""
        a = self.args
        steps: list[dict[str, Any]] = []
        runs: list[PathRun] = []
        best: int | None = None
        rate = float(a.start_rate)
        try:
            while len(steps) < a.max_steps:
                step, run = ladder_step(
                    kind,
                    self.bootstrap,
                    self.broker_pid,
                    self.workdir(f"{kind}-{instruments}x{partitions}-{rate:.0f}"),
                    rate=round(rate),
                    step_s=a.step_s,
                    instruments=instruments,
                    partitions=partitions,
                    pipelined=a.pipelined,
                )
                steps.append(step)
                runs.append(run)
                if step["sustained"]:
                    best = len(steps) - 1
                    rate *= FACTOR
                elif best is None:
                    rate /= FACTOR  # nothing held yet: search downwards
                else:
                    break
            out: dict[str, Any] = {
                "steps": steps,
                "highest_sustained_per_s": None,
                # No step above the highest failed: the search stopped at --max-steps, so the
                # figure is only a lower bound.
                "lower_bound": bool(steps) and steps[-1]["sustained"],
                # The step that ended the search failed only because the feed fell behind.
                "limited_by_feed": bool(steps)
                and steps[-1]["failed_because"] == ["feed behind its schedule"],
            }
            if best is not None:
                top = steps[best]
                out["highest_sustained_per_s"] = top["offered_per_s"]
                out["at_highest"] = {"cpu": top["cpu"], "memory": top["memory"]}
                out["output_check"] = check_output(runs[best])
                print(f"    {kind} output check: {out['output_check']}", flush=True)
        finally:
            deleted = [drop_topics(self.bootstrap, run.topics) for run in runs]
        out["topics_deleted"] = all(deleted)
        return out

    def latency(self, kind: str, hz: float, partitions: int) -> dict[str, Any]:
        """One latency case."""
        total = LATENCY_INSTRUMENTS * hz
        return latency_case(
            kind,
            self.bootstrap,
            self.broker_pid,
            self.workdir(f"{kind}-latency-{total:.0f}"),
            hz=hz,
            instruments=LATENCY_INSTRUMENTS,
            partitions=partitions,
            measure_s=self.args.measure_s,
            pipelined=self.args.pipelined,
        )


def _summarise_search(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one kind's searches at one combination."""
    tops = [r for r in runs if r["highest_sustained_per_s"] is not None]
    cpu_roles = ("publisher_each", "relay_all", "broker", "feed")
    return {
        "highest_sustained_per_s_each_round": [r["highest_sustained_per_s"] for r in runs],
        "sustained_per_s_median": _median([r["highest_sustained_per_s"] for r in runs], 0),
        "any_lower_bound": any(r["lower_bound"] for r in runs),
        "any_limited_by_feed": any(r["limited_by_feed"] for r in runs),
        "cpu_us_per_price_median": {
            role: _median([t["at_highest"]["cpu"]["cpu_us_per_price_by_role"][role] for t in tops])
            for role in cpu_roles
        },
        "peak_hwm_mib_max": {
            role: max(
                (
                    v
                    for t in tops
                    if (v := t["at_highest"]["memory"]["peak_hwm_mib_by_role"].get(role))
                    is not None
                ),
                default=None,
            )
            for role in ("publisher", "relay", "broker", "feed")
        },
        "output_checks_ok": [r["output_check"]["ok"] for r in tops],
        "runs": runs,
    }


def _summarise_latency(runs: list[dict[str, Any]]) -> dict[str, Any]:
    lat = [r["source_to_receive"] for r in runs]
    hops = [r["hop"] for r in runs]
    return {
        "p50_ms_median": _median([x.get("p50_ms") for x in lat]),
        "p99_ms_median": _median([x.get("p99_ms") for x in lat]),
        "hop_p50_ms_median": _median([x.get("p50_ms") for x in hops]),
        "hop_p99_ms_median": _median([x.get("p99_ms") for x in hops]),
        "max_ms_max": max((x.get("max_ms", 0.0) for x in lat), default=None),
        "n_total": sum(x.get("n", 0) for x in lat),
        "runs": runs,
    }


def _table(figures: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """Rows of the closing table: figure, product, reference, ratio."""
    rows: list[tuple[str, Any, Any, Any]] = []
    for combo, c in figures["throughput"].items():
        p, r = c["product"]["sustained_per_s_median"], c["reference"]["sustained_per_s_median"]
        rows.append((f"sustained prices/s ({combo})", p, r, _ratio(p, r)))
    for rate, c in figures.get("latency", {}).items():
        for q in ("p50_ms_median", "p99_ms_median"):
            p, r = c["product"][q], c["reference"][q]
            rows.append((f"latency {q.split('_')[0]} ms at {rate}", p, r, _ratio(p, r)))
        for q in ("hop_p50_ms_median", "hop_p99_ms_median"):
            p, r = c["product"][q], c["reference"][q]
            rows.append((f"one broker hop {q.split('_')[1]} ms at {rate}", p, r, _ratio(p, r)))
    base = next(iter(figures["throughput"].values()))
    for role, label in (("publisher_each", "publisher (each)"), ("relay_all", "relay (all)")):
        p = base["product"]["cpu_us_per_price_median"][role]
        r = base["reference"]["cpu_us_per_price_median"][role]
        rows.append((f"CPU µs/price {label}", p, r, _ratio(p, r)))
    for role in ("broker", "feed"):
        p = base["product"]["cpu_us_per_price_median"][role]
        r = base["reference"]["cpu_us_per_price_median"][role]
        rows.append((f"CPU µs/price {role}", p, r, _ratio(p, r)))
    for role in ("publisher", "relay", "broker"):
        p = base["product"]["peak_hwm_mib_max"][role]
        r = base["reference"]["peak_hwm_mib_max"][role]
        rows.append((f"peak RSS MiB {role} (per process)", p, r, _ratio(p, r)))
    return rows


def _print_table(rows: list[tuple[str, Any, Any, Any]]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}} | {'product':>10} | {'reference':>10} | {'ratio':>6}")
    print(f"{'-' * width}-+-{'-' * 10}-+-{'-' * 10}-+-{'-' * 6}")
    for name, p, r, q in rows:
        cells = ["-" if v is None else f"{v:g}" for v in (p, r, q)]
        print(f"{name:<{width}} | {cells[0]:>10} | {cells[1]:>10} | {cells[2]:>6}")


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2, help="product/reference alternations")
    parser.add_argument("--step-s", type=float, default=30.0, help="length of a paced step")
    parser.add_argument("--start-rate", type=float, default=4000.0, help="first step, total/s")
    parser.add_argument("--max-steps", type=int, default=8, help="steps per search")
    parser.add_argument("--instruments", default="100", help="comma-separated, e.g. 100,10000")
    parser.add_argument("--partitions", default="4", help="comma-separated, e.g. 4,32")
    parser.add_argument("--latency-hz", default="10,50", help="per instrument, 100 instruments")
    parser.add_argument("--measure-s", type=float, default=20.0, help="latency window")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--name", default="price_path", help="results file: bench/results/NAME.json"
    )
    parser.add_argument(
        "--pipelined",
        action="store_true",
        help="the reference relay without a flush per batch too (its publishers never flush)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="1 round, 2 short steps, short latency windows"
    )
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.step_s, args.max_steps, args.measure_s = 1, 8.0, 2, 5.0
    return args


def main() -> None:
    """Run every case, print the table, write bench/results/price_path.json (or the smoke JSON)."""
    args = _options()
    # SIGTERM unwinds (stopping every process started) instead of killing this process alone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    load_at_start = load()
    if load_at_start > 1.0:
        print(f"WARNING: load average {load_at_start} > 1.0 at the start: figures are loaded")
    combos = [(i, p) for i in _ints(args.instruments) for p in _ints(args.partitions)]
    hzs = [float(x) for x in args.latency_hz.split(",")] if not args.skip_latency else []
    figures: dict[str, Any] = {
        "sustained_prices_per_s": None,
        "ratio_to_reference": None,
        "loaded": load_at_start > 1.0,
        "load_average_1m_at_start": load_at_start,
        "setup": {
            "broker": "local Apache Kafka (LocalKafka), one node",
            "product": "p1/a, p2/a (pricing-ha run), relays r1, r2 (pricing-ha dedupe)",
            "reference": "bench/price_path/forwarder.py: publish p1, publish p2, relay --keep p1",
            "reference_loop": (
                "publishers and relay pipelined"
                if args.pipelined
                else "publishers pipelined (as the product's), relay flush per batch"
            ),
            "reference_loop_constants": {"batch": BATCH, "first_wait_s": FIRST_WAIT_S},
            "reference_consumer": CONSUMER_SETTINGS,
            "reference_producers": {r: producer_settings(r) for r in ("publish", "relay")},
            "roles": ROLES,
            "options": vars(args),
            "headline_combination": f"{combos[0][0]} instruments x {combos[0][1]} partitions",
            "note": "every process shares the machine's cores",
            "code": code_version(),
            "foreign_processes_at_start": foreign_processes(),
        },
    }
    searches: dict[tuple[int, int, str], list[dict[str, Any]]] = {}
    latencies: dict[tuple[float, str], list[dict[str, Any]]] = {}
    # Child processes write relative paths (e.g. telemetry traces) here, not in the repository.
    os.chdir(tempfile.mkdtemp(prefix="bench-price-path-cwd-"))
    with LocalKafka() as broker:
        bench = Bench(args, broker.bootstrap, broker.pid)
        for k in range(args.rounds):
            for instruments, partitions in combos:
                for kind in KINDS:
                    print(f"round {k + 1}: {kind}, {instruments} x {partitions}", flush=True)
                    key = (instruments, partitions, kind)
                    searches.setdefault(key, []).append(bench.search(kind, instruments, partitions))
            for hz in hzs:
                for kind in KINDS:
                    total = LATENCY_INSTRUMENTS * hz
                    print(f"round {k + 1}: {kind} latency at {total:.0f}/s", flush=True)
                    latencies.setdefault((hz, kind), []).append(
                        bench.latency(kind, hz, combos[0][1])
                    )
    figures["throughput"] = {
        f"{i}x{p}": {kind: _summarise_search(searches[(i, p, kind)]) for kind in KINDS}
        for i, p in combos
    }
    for c in figures["throughput"].values():
        c["ratio_to_reference"] = _ratio(
            c["product"]["sustained_per_s_median"], c["reference"]["sustained_per_s_median"]
        )
    base = figures["throughput"][f"{combos[0][0]}x{combos[0][1]}"]
    figures["sustained_prices_per_s"] = base["product"]["sustained_per_s_median"]
    figures["ratio_to_reference"] = base["ratio_to_reference"]
    if hzs:
        figures["latency"] = {
            f"{LATENCY_INSTRUMENTS * hz:.0f}/s": {
                kind: _summarise_latency(latencies[(hz, kind)]) for kind in KINDS
            }
            for hz in hzs
        }
        first = figures["latency"][f"{LATENCY_INSTRUMENTS * hzs[0]:.0f}/s"]["product"]
        # The goals' keys: latency feed -> subscriber and one broker hop, measured side by side
        # in the same window (the first latency rate).
        figures["latency_ms"] = {"p50": first["p50_ms_median"], "p99": first["p99_ms_median"]}
        figures["hop_ms"] = {"p50": first["hop_p50_ms_median"], "p99": first["hop_p99_ms_median"]}
    figures["cpu_us_per_price"] = base["product"]["cpu_us_per_price_median"]
    figures["load_average_1m_at_end"] = load()
    figures["foreign_processes_at_end"] = foreign_processes()
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    rows = _table(figures)
    columns = ("figure", "product", "reference", "ratio")
    figures["table"] = [dict(zip(columns, r, strict=True)) for r in rows]
    write(args.name, figures, smoke="--smoke" if args.smoke else None)
    _print_table(rows)
    for combo, c in figures["throughput"].items():
        bounded = [kind for kind in KINDS if c[kind]["any_lower_bound"]]
        if bounded:
            print(
                f"note: {combo}: {', '.join(bounded)} held every step up to --max-steps "
                "(sustained figure is a lower bound)"
            )
        fed = [kind for kind in KINDS if c[kind]["any_limited_by_feed"]]
        if fed:
            print(
                f"note: {combo}: {', '.join(fed)}: the search ended on a step the feed could "
                "not pace (a limit of the feed, not of the path)"
            )


if __name__ == "__main__":
    main()
