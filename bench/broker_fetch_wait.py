"""The embedded broker's answer to a waiting fetch: latency against ``fetch.wait.max.ms``.

Why: a planned relay move is a chain of reads at the tail of a topic (a request read by the
old owner, its release read by the successor, the successor's own NELI heartbeat read back
before NELI lets it lead). On Apache Kafka a fetch waiting at the end of a partition is
answered as soon as a record arrives, so ``fetch.wait.max.ms`` costs no latency. Whether the
embedded broker (Tansu) does the same decides what each consumer's setting costs every move.

Method: one embedded broker, topic ``t`` (one partition). For each ``fetch.wait.max.ms`` value
a consumer already at the end of the partition reads records produced one at a time at 27 per
second (not a multiple of any value), each carrying its send time; the latency is read time
minus send time, on one clock. The reference is the same measurement at 10 ms in the same run
(the relay's input, standby tail and subscribers fetch with 10 ms; NELI's heartbeat consumer
with a third of the pulse interval, at most 100 ms: 100 ms for the relay).

The cost side: the broker's CPU while two NELI members (the relay's settings: fast variant,
exclusive, S 2000 ms, T 1600 ms, pulse 300 ms) heartbeat on a 4-partition topic, with their
heartbeat consumer at 100 ms and at 10 ms, 20 s each, alternated twice.

Run (alone on the machine): ``.venv/bin/python bench/broker_fetch_wait.py``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write
from _pipeline import code_version, foreign_processes
from _procstat import cpu_s, load
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from neli import Mode, Neli, NeliConfig, Variant
from pricing_ha.local.broker import LocalKafka

TOPIC = "t"
NELI_TOPIC = "neli"
_RATE_HZ = 27.0


def _latencies_ms(bootstrap: str, wait_ms: int, records: int) -> list[float]:
    """Send-to-read latency of ``records`` records read by a consumer at the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"wait-{wait_ms}",
            "fetch.wait.max.ms": wait_ms,
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    consumer.assign([TopicPartition(TOPIC, 0, -1)])  # the end
    for _ in range(10):  # connected and positioned before the first record
        consumer.poll(0.05)

    def send() -> None:
        for _ in range(records):
            producer.produce(TOPIC, str(time.time()).encode(), partition=0)
            producer.poll(0)
            time.sleep(1 / _RATE_HZ)
        producer.flush(10)

    sender = threading.Thread(target=send)
    sender.start()
    got: list[float] = []
    deadline = time.monotonic() + records / _RATE_HZ + 5
    try:
        while len(got) < records and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None and msg.value() is not None:
                got.append(1000 * (time.time() - float(msg.value() or b"0")))
    finally:
        sender.join()
        consumer.close()
    if len(got) < records:
        raise RuntimeError(f"read {len(got)} of {records} records at {wait_ms} ms")
    return got


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "max_ms": round(ordered[-1], 1),
    }


async def _neli_cpu(bootstrap: str, broker_pid: int, wait_ms: int, seconds: float) -> float:
    """The broker's CPU (% of a core) while two relay-like NELI members heartbeat."""
    members = [
        Neli(
            NeliConfig(
                bootstrap_servers=bootstrap,
                group_id=f"g-{wait_ms}-{time.monotonic_ns()}",
                topic=NELI_TOPIC,
                variant=Variant.FAST,
                mode=Mode.EXCLUSIVE,
                session_timeout_ms=2000,
                threshold_ms=1600,
                clock_skew_ms=200,
                pulse_interval_ms=300,
                assignment_strategy="roundrobin",
                member_name=f"m{i}",
                consumer={"fetch.wait.max.ms": str(wait_ms)},
            )
        )
        for i in range(2)
    ]
    for member in members:
        await member.start()
    try:
        await asyncio.sleep(5)  # joined, assigned, heartbeating
        cpu0, t0 = cpu_s(broker_pid), time.monotonic()
        await asyncio.sleep(seconds)
        return round(100 * (cpu_s(broker_pid) - cpu0) / (time.monotonic() - t0), 2)
    finally:
        for member in members:
            await member.close()


def main() -> None:
    """Measure, print, write bench/results/broker_fetch_wait.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--waits", default="10,50,100,500", help="fetch.wait.max.ms values")
    parser.add_argument("--records", type=int, default=200, help="per value")
    parser.add_argument("--cpu-seconds", type=float, default=20.0, help="per NELI window")
    parser.add_argument("--out", type=Path, default=None, help="write here instead")
    args = parser.parse_args()
    waits = [int(w) for w in args.waits.split(",")]
    load_before = load()
    began = time.monotonic()
    latency: dict[str, Any] = {}
    cpu: dict[str, list[float]] = {"100": [], "10": []}
    with LocalKafka() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics(
            [NewTopic(TOPIC, 1, 1), NewTopic(NELI_TOPIC, 4, 1)]
        ).values():
            future.result()
        for wait_ms in waits:
            latency[str(wait_ms)] = _summary(_latencies_ms(broker.bootstrap, wait_ms, args.records))
            print(f"fetch.wait.max.ms={wait_ms}: {latency[str(wait_ms)]}", flush=True)
        for wait_ms in (100, 10, 100, 10):
            share = asyncio.run(_neli_cpu(broker.bootstrap, broker.pid, wait_ms, args.cpu_seconds))
            cpu[str(wait_ms)].append(share)
            print(f"two NELI members at {wait_ms} ms: broker {share} % of a core", flush=True)
    write(
        "broker_fetch_wait",
        {
            "records_per_value": args.records,
            "rate_hz": _RATE_HZ,
            "latency_by_fetch_wait_ms": latency,
            "reference": "fetch.wait.max.ms=10, the same run",
            "neli_heartbeats_broker_cpu_percent_of_a_core": {
                "members": 2,
                "partitions": 4,
                "window_s": args.cpu_seconds,
                "by_fetch_wait_ms": cpu,
            },
            "load_average_1m_before": load_before,
            "load_average_1m_after": load(),
            "foreign_processes": foreign_processes(),
            "code": code_version(),
            "wall_time_s": round(time.monotonic() - began, 1),
        },
        args.out,
    )


if __name__ == "__main__":
    main()
