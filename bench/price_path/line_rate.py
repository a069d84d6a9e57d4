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
   until one holds (``--max-steps`` steps in all). Before the first search, one product step at
   ``--start-rate`` for ``--warm-up-s`` warms the fresh broker up and is not judged (recorded as
   ``warm_up``): a first step on a cold broker JVM sometimes failed, and the search then held it
   on its way back up. The output of the highest sustained step is then
   checked: the product's ``prices`` exactly once against the feed
   (:func:`pricing_ha.local.tails.exactly_once`), the reference's output as distinct (key, value)
   pairs against the feed's count.
2. **latency** at 100 instruments x ``--latency-hz`` (1,000/s, and 0.8 x the round's sustained
   product rate, the reference at the same rate): source (the feed's ``source_time_ns``) ->
   receive by ``bench.price_path.latency_probe`` on the output topic, over ``--measure-s``;
   p50 / p99 / max.
3. **CPU per price** of every process (publishers / forwarders, relays, broker, feed), from
   ``/proc/<pid>/stat`` over each case's steady window, divided by the prices delivered in it.
4. **memory**: VmRSS and VmHWM of every process at the end of each case; with two instrument
   counts or more, the bytes an instrument costs each role (publisher, relay) at each partition
   count, from the peak RSS at the fewest and the most (:mod:`bench.price_path.line_rate_report`
   states the method, and the JSON repeats it).
5. **scale**: the search and memory at each ``--instruments`` x ``--partitions`` combination
   (``--scale``: 100 and 100,000 instruments on 4 and 32 partitions, short steps from near the
   known rates, three per search; about 15 minutes).
6. **direct subscriber** (``--direct-rate``, none by default): per round and rate, a fresh
   product path with ``pricing-ha subscribe --direct`` reading ``prices.raw`` while the feed
   sends that rate for ``--step-s``: every price exactly once, how far behind at the feed's exit,
   the drain, its CPU per price (:mod:`bench.price_path.direct_keepup`). ``0.8x`` asks for 0.8 x
   the round's sustained product rate.

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
[--warm-up-s 20] [--reference-start-rate R] [--instruments 100[,10000,100000]]
[--partitions 4[,32]] [--latency-hz 10,0.8x] [--direct-rate 12000|0.8x] [--pipelined] [--scale]
[--smoke]``.
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
from bench.price_path.direct_keepup import direct_case, direct_rates
from bench.price_path.forwarder import CONSUMER_SETTINGS, producer_settings
from bench.price_path.line_rate_report import (
    latency_figures,
    latency_hz,
    memory_per_instrument,
    print_table,
    ratio,
    summarise_search,
    table,
)
from pricing_ha.local.broker import LocalKafka
from pricing_ha.member.worker import BATCH, FIRST_WAIT_S

KINDS = ("product", "reference")
FACTOR = 1.25
LATENCY_INSTRUMENTS = 100
#: ``--scale``: 100 and 100,000 instruments on 4 and 32 partitions, one round, short steps
#: starting near the rates each path held on this machine (the product ~15,000/s, the reference
#: ~30,000/s), three steps per search: about 15 minutes.
SCALE: dict[str, Any] = {
    "instruments": "100,100000",
    "partitions": "4,32",
    "rounds": 1,
    "step_s": 10.0,
    "start_rate": 12207.0,
    "reference_start_rate": 23842.0,
    "max_steps": 3,
    "skip_latency": True,
    "name": "price_path_scale",
}


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


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
        start = a.reference_start_rate if kind == "reference" else None
        rate = float(start or a.start_rate)
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

    def warm_up(self, instruments: int, partitions: int) -> dict[str, Any]:
        """One unjudged product step on the fresh broker before any search (see the module
        docstring): its figures are recorded, not used."""
        a = self.args
        rate = round(a.start_rate)
        print(f"warm-up: product at {rate}/s for {a.warm_up_s:g} s (not judged)", flush=True)
        step, run = ladder_step(
            "product",
            self.bootstrap,
            self.broker_pid,
            self.workdir(f"warm-up-{instruments}x{partitions}-{rate}"),
            rate=rate,
            step_s=a.warm_up_s,
            instruments=instruments,
            partitions=partitions,
            pipelined=a.pipelined,
        )
        drop_topics(self.bootstrap, run.topics)
        keep = ("offered_per_s", "prices_per_s_steady", "sustained", "failed_because")
        return {"step_s": a.warm_up_s} | {k: step[k] for k in keep}

    def latency_cases(
        self, k: int, specs: list[str], held: float | None, partitions: int
    ) -> list[tuple[tuple[str, str], dict[str, Any]]]:
        """Round ``k``'s latency cases, ((``--latency-hz`` item, kind), case), product and
        reference at each rate (``held``: the round's sustained product rate, for fractions)."""
        out = []
        for spec in specs:
            hz = latency_hz(spec, held, LATENCY_INSTRUMENTS)
            if hz is None:
                print(f"round {k}: no latency at {spec}: no rate was sustained", flush=True)
                continue
            for kind in KINDS:
                print(f"round {k}: {kind} latency at {LATENCY_INSTRUMENTS * hz:.0f}/s", flush=True)
                out.append(((spec, kind), self.latency(kind, hz, partitions)))
        return out

    def direct_cases(self, k: int, held: float | None, partitions: int) -> list[dict[str, Any]]:
        """Round ``k``'s direct-subscriber keep-up cases (:mod:`.direct_keepup`) at each
        ``--direct-rate`` (``held``: the round's sustained product rate, for fractions)."""
        spec = self.args.direct_rate
        rates = direct_rates(spec, held)
        out: list[dict[str, Any]] = []
        if len(rates) < len([x for x in spec.split(",") if x.strip()]):
            out.append({"round": k, "skipped": "a fraction of no sustained rate"})
        for rate in rates:
            print(f"round {k}: direct subscriber at {rate:.0f}/s", flush=True)
            case = direct_case(
                self.bootstrap,
                self.broker_pid,
                self.workdir(f"direct-{rate:.0f}"),
                rate=rate,
                step_s=self.args.step_s,
                instruments=LATENCY_INSTRUMENTS,
                partitions=partitions,
            )
            case["round"] = k
            case["fraction_of_sustained"] = None if not held else round(rate / held, 3)
            out.append(case)
        return out


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2, help="product/reference alternations")
    parser.add_argument("--step-s", type=float, default=30.0, help="length of a paced step")
    parser.add_argument("--start-rate", type=float, default=4000.0, help="first step, total/s")
    parser.add_argument("--max-steps", type=int, default=8, help="steps per search")
    parser.add_argument("--instruments", default="100", help="comma-separated, e.g. 100,10000")
    parser.add_argument("--partitions", default="4", help="comma-separated, e.g. 4,32")
    parser.add_argument(
        "--latency-hz",
        default="10,0.8x",
        help="per instrument, 100 instruments; '0.8x': 0.8 x the round's sustained product rate",
    )
    parser.add_argument(
        "--warm-up-s",
        type=float,
        default=20.0,
        help="an unjudged product step at --start-rate on the fresh broker first (0: none)",
    )
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
        "--reference-start-rate",
        type=float,
        default=None,
        help="the reference's first step, total/s (default: --start-rate)",
    )
    parser.add_argument(
        "--direct-rate",
        default="",
        help="also check that `subscribe --direct` keeps up at these totals/s (100 "
        "instruments, --step-s each); '0.8x': 0.8 x this run's sustained rate; with "
        "--max-steps 0 --skip-latency, the check alone",
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="the scale run's defaults (explicit options win): "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in SCALE.items() if v is not True),
    )
    parser.add_argument(
        "--smoke", action="store_true", help="1 round, 2 short steps, short latency windows"
    )
    args = parser.parse_args()
    if args.scale:
        parser.set_defaults(**SCALE)
        args = parser.parse_args()
    if args.smoke:
        args.rounds, args.step_s, args.max_steps, args.measure_s = 1, 8.0, 2, 5.0
        args.warm_up_s = 0.0
    return args


def _print_notes(figures: dict[str, Any]) -> None:
    """What limits the searches' figures (lower bounds, the feed's pace)."""
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
    specs = (
        [] if args.skip_latency else [x.strip() for x in args.latency_hz.split(",") if x.strip()]
    )
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
    latencies: dict[tuple[str, str], list[dict[str, Any]]] = {}
    directs: list[dict[str, Any]] = []
    # Child processes write relative paths (e.g. telemetry traces) here, not in the repository.
    os.chdir(tempfile.mkdtemp(prefix="bench-price-path-cwd-"))
    with LocalKafka() as broker:
        bench = Bench(args, broker.bootstrap, broker.pid)
        if args.warm_up_s > 0 and args.max_steps > 0:
            figures["warm_up"] = bench.warm_up(*combos[0])
        for k in range(args.rounds):
            for instruments, partitions in combos:
                for kind in KINDS:
                    print(f"round {k + 1}: {kind}, {instruments} x {partitions}", flush=True)
                    key = (instruments, partitions, kind)
                    searches.setdefault(key, []).append(bench.search(kind, instruments, partitions))
            held = searches[(*combos[0], "product")][-1]["highest_sustained_per_s"]
            for at, case in bench.latency_cases(k + 1, specs, held, combos[0][1]):
                latencies.setdefault(at, []).append(case)
            directs += bench.direct_cases(k + 1, held, combos[0][1])
    figures["throughput"] = {
        f"{i}x{p}": {kind: summarise_search(searches[(i, p, kind)]) for kind in KINDS}
        for i, p in combos
    }
    for c in figures["throughput"].values():
        c["ratio_to_reference"] = ratio(
            c["product"]["sustained_per_s_median"], c["reference"]["sustained_per_s_median"]
        )
    base = figures["throughput"][f"{combos[0][0]}x{combos[0][1]}"]
    figures["sustained_prices_per_s"] = base["product"]["sustained_per_s_median"]
    figures["ratio_to_reference"] = base["ratio_to_reference"]
    if specs:
        latency_figures(figures, specs, latencies, LATENCY_INSTRUMENTS)
    figures["cpu_us_per_price"] = base["product"]["cpu_us_per_price_median"]
    if args.direct_rate:
        figures["direct_subscriber"] = {
            "kept_up_every_case": bool(directs) and all(d.get("kept_up") for d in directs),
            "cases": directs,
        }
    memory = memory_per_instrument(searches, _ints(args.instruments), _ints(args.partitions))
    if memory is not None:
        figures["memory_per_instrument"] = memory
        figures["memory_bytes_per_instrument"] = memory["product_bytes_per_instrument_max"]
    figures["load_average_1m_at_end"] = load()
    figures["foreign_processes_at_end"] = foreign_processes()
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    rows = table(figures)
    columns = ("figure", "product", "reference", "ratio")
    figures["table"] = [dict(zip(columns, r, strict=True)) for r in rows]
    write(args.name, figures, smoke="--smoke" if args.smoke else None)
    print_table(rows)
    _print_notes(figures)


if __name__ == "__main__":
    main()
