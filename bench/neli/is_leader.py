"""Cost of asking NELI "do I lead this?" (the question asked before every price is published).

Measures, per call: ``LeadershipTracker.leads`` (the decision itself), ``Neli.leads(partition)``
and ``Neli.is_leader(role)`` (which adds the lock, the clocks and murmur2 of the role) on a
running member of a real (local Apache Kafka) broker, for each variant and mode.

Run: ``.venv/bin/python -m bench.neli.is_leader``
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common.report import write
from neli import Mode, Neli, NeliConfig, Variant
from neli._tracker import LeadershipTracker
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.waiting import wait_for_async

N = 200_000


def _per_call_ns(fn: Callable[[Any], object], arg: object, n: int = N) -> float:
    call = fn
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            call(arg)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return round(best, 1)


async def _measure(bootstrap: str, variant: Variant, mode: Mode) -> dict[str, float]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(timeout=15)
    cfg = NeliConfig(
        bootstrap_servers=bootstrap, group_id=topic, topic=topic, variant=variant, mode=mode
    )
    async with Neli(cfg) as neli:
        await wait_for_async(
            lambda: len(neli.led_partitions()) == 4,
            60,
            "the member to lead all 4 partitions (the hot path is measured on a leader)",
            interval_s=0.1,
        )
        tracker = LeadershipTracker(cfg, "bench")
        now = time.monotonic()
        tracker.tick(now)
        tracker.assign([0], now - 10)
        return {
            "neli_is_leader_role_ns": _per_call_ns(neli.is_leader, "EURUSD"),
            "neli_leads_partition_ns": _per_call_ns(neli.leads, 1),
            "tracker_leads_ns": _per_call_ns(lambda p: tracker.leads(p, now, now), 0),
        }


def main() -> None:
    """Parse the (no) arguments and measure."""
    argparse.ArgumentParser(description=__doc__.split("\n", 1)[0]).parse_args()
    asyncio.run(_measure_all())


async def _measure_all() -> None:
    """Measure every variant/mode on one local Apache Kafka."""
    figures: dict[str, dict[str, float]] = {}
    with LocalKafka() as broker:
        for variant in Variant:
            for mode in Mode:
                key = f"{variant.value}/{mode.value}"
                figures[key] = await _measure(broker.bootstrap, variant, mode)
                print(key, figures[key], flush=True)
    write("neli_is_leader", {"calls_per_measurement": N, "best_of": 5, "per_call": figures})


if __name__ == "__main__":
    main()
