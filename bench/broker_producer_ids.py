"""The embedded broker's CPU per idempotent record against the producer ids it has seen.

Why: relay takeover silences grow round by round when relays keep joining and leaving one
broker (README, relay rows). Tansu 0.6.0 keeps every producer id it has ever handed out, with
its per-partition sequences, in one metadata document that it reads and rewrites on each
idempotent produce (``tansu-storage/src/dynostore.rs``, ``Meta.producers``); nothing removes an
entry. Every process start of the product creates idempotent producers, so this cost grows
with the restarts a broker has seen.

Method: one embedded broker, topic ``t`` with 4 partitions. A measuring producer (idempotent,
acks=all, linger 5 ms) sends ``--rate`` records/s of 100 bytes for ``--seconds``; the broker's
CPU (``/proc/<pid>/stat``) over that window is divided by the records. Between measurements,
throwaway idempotent producers are created, each writing one record to every partition (as a
relay's or a publisher's producer does) and closed, until ``--steps`` producer ids have been
seen. The reference is the first measurement, on a fresh broker, in the same run.

Run: ``.venv/bin/python bench/broker_producer_ids.py [--steps 0,100,200,300]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write
from _pipeline import code_version, foreign_processes
from _procstat import cpu_s, load
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pricing_ha.local.broker import LocalKafka

PARTITIONS = 4


def _measure(broker: LocalKafka, rate: float, seconds: float) -> dict[str, Any]:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
    )
    producer.produce("t", b"warm")
    producer.flush(10)
    burst = max(1, int(rate / 20))  # 20 bursts per second
    cpu0, start, sent = cpu_s(broker.pid), time.monotonic(), 0
    while time.monotonic() - start < seconds:
        for _ in range(burst):
            producer.produce("t", b"x" * 100, partition=sent % PARTITIONS)
            sent += 1
        producer.poll(0)
        time.sleep(max(0.0, start + sent / rate - time.monotonic()))
    left = producer.flush(10)
    elapsed, cpu = time.monotonic() - start, cpu_s(broker.pid) - cpu0
    return {
        "records": sent,
        "not_acknowledged": left,
        "broker_cpu_percent_of_a_core": round(100 * cpu / elapsed, 1),
        "broker_cpu_us_per_record": round(1e6 * cpu / sent, 1),
    }


def _create_producers(broker: LocalKafka, count: int) -> None:
    for _ in range(count):
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all"}
        )
        for partition in range(PARTITIONS):
            producer.produce("t", b"y", partition=partition)
        producer.flush(10)


def main() -> None:
    """Measure at each step, print, write bench/results/broker_producer_ids.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", default="0,100,200,300", help="producer ids seen, ascending")
    parser.add_argument("--rate", type=float, default=1000.0, help="records/s while measuring")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    load_before = load()
    rows = []
    with LocalKafka() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", PARTITIONS, 1)])["t"].result()
        seen = 0
        for step in steps:
            _create_producers(broker, step - seen)
            seen = max(seen, step)
            row = {"producer_ids_seen": seen, **_measure(broker, args.rate, args.seconds)}
            print(row, flush=True)
            rows.append(row)
    base = rows[0]["broker_cpu_us_per_record"]
    for row in rows:
        row["ratio_to_fresh_broker"] = round(row["broker_cpu_us_per_record"] / base, 2)
    write(
        "broker_producer_ids",
        {
            "rate_per_s": args.rate,
            "seconds": args.seconds,
            "partitions": PARTITIONS,
            "load_average_1m_before": load_before,
            "load_average_1m_after": load(),
            "foreign_processes": foreign_processes(),
            "code": code_version(),
            "steps": rows,
        },
    )


if __name__ == "__main__":
    main()
