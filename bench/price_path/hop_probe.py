"""Single-hop broker latency, the reference for the end-to-end figures (run as a process).

``produce``: a paced producer stamping ``time.time_ns()`` into each value right before ``produce()``
(absolute schedule, like the feed). ``consume``: a :class:`pricing_ha.local.tails.TopicTail`
(``fetch.wait.max.ms=10``, like the subscriber and the relay) from the end of the topic, taking the
receive time after each fetch; it writes n / p50 / p99 / max (ms) as JSON.

Run: ``python -m bench.price_path.hop_probe produce BOOTSTRAP TOPIC RATE DURATION_S [LINGER_MS]``
and ``python -m bench.price_path.hop_probe consume BOOTSTRAP TOPIC PARTITIONS MAX_S OUT_JSON
[SKIP_S]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from confluent_kafka import OFFSET_END, Message, Producer

from pricing_ha.local.tails import TopicTail
from pricing_ha.local.waiting import wait_until
from pricing_ha.subscribing.stats import percentiles

PRODUCER_SETTINGS: dict[str, str | int | bool] = {
    "acks": "all",
    "enable.idempotence": True,
    "log.connection.close": False,
}


def produce(bootstrap: str, topic: str, rate: float, duration_s: float, linger_ms: int) -> None:
    """Send ``rate`` stamped records per second for ``duration_s``."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": linger_ms, **PRODUCER_SETTINGS}
    )
    producer.list_topics(topic, timeout=10)  # connect before the first stamp
    start = time.monotonic()
    i = 0
    while True:
        due = start + i / rate
        if due - start >= duration_s:
            break
        while (wait := due - time.monotonic()) > 0:
            time.sleep(min(wait, 0.05))
        value = str(time.time_ns()).encode()
        while True:
            try:
                producer.produce(topic, key=str(i % 100).encode(), value=value)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        i += 1
    producer.flush(30)
    print(f"produced {i} records in {time.monotonic() - start:.1f} s")


def consume(
    bootstrap: str, topic: str, partitions: int, max_s: float, out: Path, *, skip_s: float
) -> None:
    """Receive until idle (5 s after data) or ``max_s``; write latency percentiles."""
    stamps: list[tuple[int, int]] = []  # (sent ns, received ns)
    last_data: list[float] = []

    def keep(msgs: list[Message], received: float) -> None:
        now = time.time_ns()
        for msg in msgs:
            value = msg.value()
            if isinstance(value, bytes):
                stamps.append((int(value), now))
                last_data[:] = [received]

    tail = TopicTail(bootstrap, [topic], partitions, keep, start=OFFSET_END, name="bench-hop")
    try:
        wait_until(lambda: bool(last_data) and time.monotonic() - last_data[0] > 5.0, max_s)
    finally:
        tail.close()
    first = min((s for s, _ in stamps), default=0)
    kept = [(r - s) / 1e9 for s, r in stamps if s >= first + skip_s * 1e9]
    doc = {"received": len(stamps), "skipped_first_s": skip_s, **percentiles(kept)}
    out.write_text(json.dumps(doc) + "\n")
    print(json.dumps(doc))


def main() -> None:
    """Parse the arguments and produce or consume."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    prod = sub.add_parser("produce", help="a paced producer stamping send times")
    prod.add_argument("bootstrap")
    prod.add_argument("topic")
    prod.add_argument("rate", type=float)
    prod.add_argument("duration_s", type=float)
    prod.add_argument("linger_ms", type=int, nargs="?", default=1)
    cons = sub.add_parser("consume", help="a tail from the end, writing percentiles as JSON")
    cons.add_argument("bootstrap")
    cons.add_argument("topic")
    cons.add_argument("partitions", type=int)
    cons.add_argument("max_s", type=float)
    cons.add_argument("out", type=Path)
    cons.add_argument("skip_s", type=float, nargs="?", default=1.0)
    a = parser.parse_args()
    if a.cmd == "produce":
        produce(a.bootstrap, a.topic, a.rate, a.duration_s, a.linger_ms)
    else:
        consume(a.bootstrap, a.topic, a.partitions, a.max_s, a.out, skip_s=a.skip_s)


if __name__ == "__main__":
    main()
