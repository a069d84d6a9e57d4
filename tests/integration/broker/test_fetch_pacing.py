"""On Apache Kafka, a consumer paced by the documented recipe receives every record once, in order.

How often it fetches is a figure, printed here and not asserted (the price path's requests are
measured by ``bench/broker/requests.py``): alone on the machine this consumer made 141-156
fetch requests a second paced and 80-136 unpaced, and 322 paced in a CI run under the whole
suite's load (docs/measurements.md).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from pricing_ha.dedupe.raw_input import FETCH_SETTINGS
from pricing_ha.kafka.fetching import PACING
from pricing_ha.local.waiting import wait_for

RATE = 1000  # records a second, over 4 partitions
SECONDS = 4.0


def _fetch_requests(stats: dict[str, Any]) -> int:
    """Fetch requests sent to the cluster's brokers (not the bootstrap entry)."""
    return sum(
        b.get("req", {}).get("Fetch", 0) for b in stats["brokers"].values() if b["nodeid"] >= 0
    )


def test_paced_consumer_loses_nothing(bootstrap: str, topic_factory: Callable[[int], str]) -> None:
    """At 1,000 records/s on 4 partitions, the relay's input settings with PACING receive every
    record once, in order, and keep fetching while records flow."""
    topic = topic_factory(4)
    latest: dict[str, Any] = {}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **FETCH_SETTINGS,
            **PACING,
            "group.id": f"{topic}-paced",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": lambda s: latest.update(json.loads(s)),
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    seen: dict[int, list[int]] = {p: [] for p in range(4)}
    sent = int(RATE * SECONDS)
    done = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        start = time.monotonic()
        for i in range(sent):
            delay = start + i / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, str(i).encode(), partition=i % 4)
            producer.poll(0)
        producer.flush(10)
        done.set()

    try:
        wait_for(lambda: _poll_stats(consumer, latest), 15, "consumer statistics", interval_s=0)
        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        first: tuple[float, int] | None = None  # (when, fetches) once records flow
        last: tuple[float, int] | None = None  # (when, fetches) once all were sent
        deadline = time.monotonic() + SECONDS + 20
        while sum(map(len, seen.values())) < sent and time.monotonic() < deadline:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                seen[msg.partition() or 0].append(int(msg.value() or b"-1"))
            if first is None and sum(map(len, seen.values())) >= RATE // 4:
                first = (time.monotonic(), _fetch_requests(latest))
            if last is None and done.is_set():
                last = (time.monotonic(), _fetch_requests(latest))
        writer.join(10)
    finally:
        consumer.close()
    for p, values in seen.items():
        assert values == list(range(p, sent, 4)), f"partition {p}: lost, repeated or out of order"
    assert first is not None
    assert last is not None
    rate = (last[1] - first[1]) / (last[0] - first[0])
    print(f"paced consumer: {rate:.0f} fetch requests/s while records flowed")
    assert rate > 0, "no fetch request counted while records flowed"


def _poll_stats(consumer: Consumer, latest: dict[str, Any]) -> bool:
    consumer.poll(0.05)
    return bool(latest)
