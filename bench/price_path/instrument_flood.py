"""Memory of a relay and a publisher under a flood of 200,000 new instrument names.

In-process, no broker: each case runs in a fresh subprocess and reports the memory the flood
left allocated (``retained_mib``: Python allocations still live after it, by ``tracemalloc``;
the records themselves are built per batch and freed), its resident set size (RSS) before and
after, and how many instruments ended up with state.

* ``relay``: the relay's hot path (:class:`pricing_ha.dedupe.hot_path.HotPath`, its arbiters,
  output and metrics) over a producer that keeps nothing, on 4 partitions, plus the standby's
  views (:class:`pricing_ha.dedupe.control.PartitionView`) folded from what it emitted; one
  valid raw price per new name. With the default ``limits.max_instruments_per_partition``
  (8000) and with a limit high enough to admit every name (the unbounded behaviour).
* ``publisher``: a publisher's per-partition seq guards
  (:class:`pricing_ha.publishing.quotes.SequenceGuard`) and its metrics tally, one quote per
  new name, bounded and unbounded.

Run: ``.venv/bin/python -m bench.price_path.instrument_flood`` (about a minute).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from confluent_kafka import Message, Producer

from bench.common.report import write
from neli.partitioner import role_partition
from pricing_ha.config import AppConfig, BrokerConfig, LimitsConfig
from pricing_ha.dedupe.control import PartitionView
from pricing_ha.dedupe.hot_path import HotPath
from pricing_ha.dedupe.output import RelayOutput
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.raw_input import RawInput
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.publishing.pricing import Price, encode_price
from pricing_ha.publishing.quotes import SequenceGuard
from pricing_ha.telemetry import PricingMetrics, Telemetry
from pricing_ha.telemetry.tally import PriceTally

NAMES = 200_000
PARTITIONS = 4
BATCH = 500
DEFAULT_LIMIT = LimitsConfig().max_instruments_per_partition
CASES = ("relay-default", "relay-unbounded", "publisher-default", "publisher-unbounded")


def _rss_mib() -> float:
    gc.collect()
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _retained_mib() -> float:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 2**20


def _measured(flood: Callable[[], None]) -> dict[str, float]:
    """Run ``flood``; the memory it left allocated, the RSS around it, and its time."""
    before = _rss_mib()
    tracemalloc.start()
    base = _retained_mib()
    t0 = time.perf_counter()
    flood()
    elapsed = time.perf_counter() - t0
    retained = _retained_mib() - base
    tracemalloc.stop()
    after = _rss_mib()
    return {
        "retained_mib": round(retained, 1),
        "rss_before_mib": round(before, 1),
        "rss_after_mib": round(after, 1),
        "rss_growth_mib": round(after - before, 1),
        "seconds": round(elapsed, 2),
    }


def _raw(i: int) -> Message:
    name = f"FLOOD{i:06d}"
    key = name.encode()
    price = Price(instrument=name, seq=1, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
    return Message(
        topic="prices.raw",
        partition=role_partition(key, PARTITIONS),
        offset=i,
        key=key,
        value=encode_price(price),
        headers=[("group", b"p1"), ("member", b"a"), ("publish_ns", b"1")],
    )


class _Sink:
    """A producer that keeps nothing; prices it is given are folded into standby views."""

    def __init__(self, views: list[PartitionView]) -> None:
        self.views = views
        self.offsets = [0] * len(views)
        self.dead = 0

    def produce(self, topic: str, **kw: Any) -> None:
        if topic.endswith(".dlq"):
            self.dead += 1
            return
        p = kw["partition"]
        price = Price(instrument=kw["key"].decode(), seq=1, bid=1, ask=1, mid=1, source_time_ns=0)
        self.views[p].fold_price(self.offsets[p], (sys.intern(price.instrument), price.seq))
        self.offsets[p] += 1

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def init_transactions(self, timeout: float = 0) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def commit_transaction(self, timeout: float = 0) -> None:
        pass


def _relay(limit: int) -> dict[str, Any]:
    cfg = AppConfig(
        broker=BrokerConfig(librdkafka={"message.max.bytes": str(limit * 100 + 10**6)}),
        limits=LimitsConfig(max_instruments_per_partition=limit),
    )
    views = [PartitionView() for _ in range(PARTITIONS)]
    sink = _Sink(views)
    stats = RelayStats()
    producers = OutputProducers(
        cfg, "r1", "g", stats=stats, producer_factory=lambda _s: cast(Producer, sink)
    )
    producers.fences.fence(list(range(PARTITIONS)), 1.0)  # as a takeover does
    out = RelayOutput(
        cfg, "r1", "g", producers, lambda _p: True, stats=stats, telemetry=Telemetry.noop("b")
    )
    hot = HotPath(
        out,
        cast(RawInput, SimpleNamespace(commits=lambda *_a: [], rewind=lambda *_a: True)),
        cast(ReadAhead, SimpleNamespace(reading=lambda: False, skipping=False, replaying=False)),
        window_s=0.5,
        may_emit=lambda _p: True,
        handing_over=lambda _p: False,
        asked=lambda _p: False,
        active=set(range(PARTITIONS)),
        drop=lambda _p: None,
        commit=lambda _c: None,
        limits=cfg.limits,
    )
    for p in range(PARTITIONS):
        hot.take_up(p, {})
    hot.process([_raw(i) for i in range(BATCH)])  # warm up: first allocations of every kind

    def flood() -> None:
        for start in range(BATCH, NAMES, BATCH):
            hot.process([_raw(i) for i in range(start, start + BATCH)])

    measured = _measured(flood)
    return {
        "limit_per_partition": limit,
        **measured,
        "arbiter_instruments": sum(a.instrument_count() for a in hot.arbiters.values()),
        "standby_marks": sum(len(v.high) for v in views),
        "largest_checkpoint_bytes": max(len(v.encode()) for v in views),
        "dead_lettered": sink.dead,
    }


def _publisher(limit: int | None) -> dict[str, Any]:
    metrics = PricingMetrics(Telemetry.noop("b").meter_provider.get_meter("b"))
    tally = PriceTally(metrics, metrics.prices_published, stage="publish")
    guards = [SequenceGuard(limit) for _ in range(PARTITIONS)]

    def flood() -> None:
        for i in range(NAMES):
            name = f"FLOOD{i:06d}"
            p = role_partition(name.encode(), PARTITIONS)
            guards[p].check(name, 1)
            tally.add(p, name, 0.001, None)
            if i % BATCH == 0:
                tally.flush()
        tally.flush()

    measured = _measured(flood)
    return {
        "limit_per_partition": limit,
        **measured,
        "guard_instruments": sum(len(g) for g in guards),
    }


def _case(name: str) -> dict[str, Any]:
    if name == "relay-default":
        return _relay(DEFAULT_LIMIT)
    if name == "relay-unbounded":
        return _relay(NAMES)
    if name == "publisher-default":
        return _publisher(DEFAULT_LIMIT)
    return _publisher(None)


def main() -> None:
    """Each case in its own process; write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--case", choices=CASES, help="run one case here and print it (internal)")
    case = parser.parse_args().case
    if case is not None:
        print(json.dumps(_case(case)))
        return
    figures: dict[str, Any] = {"names": NAMES, "partitions": PARTITIONS}
    for case in CASES:
        out = subprocess.run(
            [sys.executable, "-m", "bench.price_path.instrument_flood", "--case", case],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        figures[case] = json.loads(out.strip().splitlines()[-1])
        print(case, figures[case], flush=True)
    write("instrument_flood", figures)


if __name__ == "__main__":
    main()
