"""Source-to-subscriber latency of an output topic, one OS process (for
``bench/price_path/line_rate.py``).

The same probe reads the product's ``prices`` and the reference's output, so the two figures are
comparable: a :class:`pricing_ha.local.tails.TopicTail` (``fetch.wait.max.ms=10``, like the
subscriber and the relay; control records skipped) from the end of every partition, taking the
wall-clock receive time after each fetch, as ``bench.price_path.hop_probe`` does. Each record's
value is JSON with the ``source_time_ns`` the feed stamped into the quote (quotes and prices both
carry it); the latency is receive time minus source time. Where it goes, for the product's
prices (the stamps the publisher and the relay add as headers; the reference forwards records
without them): source -> ``publish_ns`` (the feed's hop and the publisher's work),
``publish_ns`` -> ``relay_ns`` (the publisher's batching, the hop on ``prices.raw`` and the
relay's work up to its produce call) and ``relay_ns`` -> receive (the relay's flush and
transaction commit, and the hop to the probe).

Records received in the first ``SKIP_S`` (the tail's start) are left out; the next
``MEASURE_S`` are kept. It writes n / p50 / p99 / max (ms) as JSON, with the window in
``time.monotonic()`` (CLOCK_MONOTONIC, the same clock in every process on the machine) so the
caller can line it up with its own samples.

Run: ``python -m bench.price_path.latency_probe BOOTSTRAP TOPIC PARTITIONS MEASURE_S OUT_JSON
[SKIP_S]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_END, Message

from pricing_ha.kafka.headers import header_int, header_pairs
from pricing_ha.local.tails import TopicTail
from pricing_ha.subscribing.stats import percentiles

#: The segments of a price's latency, from the stamps on its value and headers (see above).
SEGMENTS = ("source_to_publish", "publish_to_relay", "relay_to_receive")


def stamps(msg: Message) -> tuple[int, int] | None:
    """A relayed price's ``publish_ns`` and ``relay_ns`` headers, or ``None`` without both."""
    publish_ns = relay_ns = None
    for name, value in header_pairs(msg.headers()):
        if name == "publish_ns":
            publish_ns = header_int(value)
        elif name == "relay_ns":
            relay_ns = header_int(value)
    return None if publish_ns is None or relay_ns is None else (publish_ns, relay_ns)


def split(source_ns: int, stamped: tuple[int, int], received_ns: int) -> tuple[float, ...]:
    """The three segments (:data:`SEGMENTS`) of one price's latency, in seconds."""
    publish_ns, relay_ns = stamped
    return (
        (publish_ns - source_ns) / 1e9,
        (relay_ns - publish_ns) / 1e9,
        (received_ns - relay_ns) / 1e9,
    )


def measure(
    bootstrap: str, topic: str, partitions: int, measure_s: float, out: Path, *, skip_s: float
) -> None:
    """Follow ``topic`` for ``skip_s + measure_s``; write the latency figures to ``out``."""
    began = time.monotonic()
    lo, hi = began + skip_s, began + skip_s + measure_s
    latencies: list[float] = []
    parts: list[list[float]] = [[] for _ in SEGMENTS]
    counts = {"received": 0, "invalid": 0}

    def keep(msgs: list[Message], received: float) -> None:
        now_ns = time.time_ns()
        counts["received"] += len(msgs)
        if not lo <= received <= hi:
            return
        for msg in msgs:
            try:
                source_ns = int(orjson.loads(msg.value() or b"")["source_time_ns"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                counts["invalid"] += 1
                continue
            latencies.append((now_ns - source_ns) / 1e9)
            stamped = stamps(msg)
            if stamped is not None:
                for part, seconds in zip(parts, split(source_ns, stamped, now_ns), strict=True):
                    part.append(seconds)

    tail = TopicTail(bootstrap, [topic], partitions, keep, start=OFFSET_END, name="bench-latency")
    try:
        time.sleep(max(0.0, hi - time.monotonic()))
    finally:
        tail.close()
    doc = {
        **percentiles(latencies),
        **counts,
        "segments": {
            name: percentiles(part) for name, part in zip(SEGMENTS, parts, strict=True) if part
        },
        "skipped_first_s": skip_s,
        "measure_s": measure_s,
        "window_monotonic": [round(lo, 3), round(hi, 3)],
    }
    out.write_text(json.dumps(doc) + "\n")
    print(json.dumps(doc))


def main() -> None:
    """Parse the arguments and measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("partitions", type=int)
    parser.add_argument("measure_s", type=float)
    parser.add_argument("out", type=Path)
    parser.add_argument("skip_s", type=float, nargs="?", default=1.0)
    a = parser.parse_args()
    measure(a.bootstrap, a.topic, a.partitions, a.measure_s, a.out, skip_s=a.skip_s)


if __name__ == "__main__":
    main()
