"""The embedded broker's fetch cost against the record batches a partition holds.

Why: relay takeover silences grow round by round on one broker (README, relay rows), and the
producer ids the broker keeps (``bench/broker_producer_ids.py``) are too few to explain it.
Tansu 0.6.0's memory storage keeps each record batch as an object of its own, and its fetch
lists *every* batch object of the partition to find the ones at or after the requested offset,
on each fetch that finds data (``tansu-storage/src/dynostore.rs``, ``fetch``); nothing removes
a batch (it has no retention, and DeleteRecords is unimplemented). So each fetch costs time
proportional to the batches the partition has ever held, and every consumer of the pipeline
(publishers, relays, standby tails, NELI, subscribers) pays it on every fetch.

Method: one embedded broker, topic ``t`` with one partition. A filler producer (not idempotent,
``batch.num.messages`` 1, so one record is one batch) appends up to each step; the time per
batch it takes is recorded. At each step: (a) the first fetch: a new consumer assigned five
records before the end, time until it has a record, median of 10; (b) the round trip at the
tail: one record produced and flushed, time until a consumer already at the end has it,
median of 20; (c) the broker's CPU per such round trip. The reference is the first step (100
batches), on a fresh broker, in the same run.

Run: ``.venv/bin/python bench/broker_fetch_cost.py [--steps 100,5000,10000,20000,30000]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
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

from pricing_ha.local.broker import LocalKafka

TOPIC = "t"
_FILL_CHUNK = 500


def _first_record(consumer: Consumer) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is not None and msg.error() is None:
            return
    raise RuntimeError("no record within 30 s")


def _first_fetch_s(bootstrap: str, end: int, tag: str) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": tag, "fetch.wait.max.ms": 10})
    try:
        t0 = time.monotonic()
        consumer.assign([TopicPartition(TOPIC, 0, max(0, end - 5))])
        _first_record(consumer)
        return time.monotonic() - t0
    finally:
        consumer.close()


def _measure(broker: LocalKafka, producer: Producer, end: int, step: int) -> dict[str, Any]:
    first = [_first_fetch_s(broker.bootstrap, end, f"first-{step}-{i}") for i in range(10)]
    tail = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"tail-{step}", "fetch.wait.max.ms": 10}
    )
    trips = []
    try:
        tail.assign([TopicPartition(TOPIC, 0, end)])
        tail.poll(0.5)
        cpu0 = cpu_s(broker.pid)
        for _ in range(20):
            t0 = time.monotonic()
            producer.produce(TOPIC, b"y", partition=0)
            producer.flush(10)
            _first_record(tail)
            trips.append(time.monotonic() - t0)
        cpu = cpu_s(broker.pid) - cpu0
    finally:
        tail.close()
    return {
        "first_fetch_ms_median": round(1000 * statistics.median(first), 1),
        "first_fetch_ms_max": round(1000 * max(first), 1),
        "tail_round_trip_ms_median": round(1000 * statistics.median(trips), 1),
        "tail_round_trip_ms_max": round(1000 * max(trips), 1),
        "broker_cpu_ms_per_round_trip": round(1000 * cpu / len(trips), 2),
    }


def main() -> None:
    """Measure at each step, print, write bench/results/broker_fetch_cost.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--steps", default="100,5000,10000,20000,30000", help="batches, ascending, each >= 5"
    )
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    if steps[0] < 5:
        parser.error("--steps: the first step needs 5 batches for the first fetch to read")
    load_before = load()
    began = time.monotonic()
    rows = []
    with LocalKafka() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result()
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "linger.ms": 0,
                "batch.num.messages": 1,
                "acks": "all",
            }
        )
        end = 0  # offsets written so far (one record per batch)
        for step in steps:
            t0, filled = time.monotonic(), 0
            while end < step:
                for _ in range(min(_FILL_CHUNK, step - end)):
                    producer.produce(TOPIC, b"x" * 50, partition=0)
                    end += 1
                    filled += 1
                producer.flush(30)
            fill_s = time.monotonic() - t0
            row: dict[str, Any] = {
                "batches_held": end,
                "fill_ms_per_batch": round(1000 * fill_s / filled, 3) if filled else None,
                **_measure(broker, producer, end, step),
            }
            end += 20  # the round trips' records
            print(row, flush=True)
            rows.append(row)
    base = rows[0]
    for row in rows:
        for key in ("first_fetch_ms_median", "tail_round_trip_ms_median"):
            row[f"{key}_ratio_to_fresh_broker"] = round(row[key] / base[key], 2)
    write(
        "broker_fetch_cost",
        {
            "partitions": 1,
            "record_bytes": 50,
            "load_average_1m_before": load_before,
            "load_average_1m_after": load(),
            "foreign_processes": foreign_processes(),
            "code": code_version(),
            "wall_time_s": round(time.monotonic() - began, 1),
            "steps": rows,
        },
    )


if __name__ == "__main__":
    main()
