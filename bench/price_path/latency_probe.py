"""Source-to-subscriber latency of an output topic, one OS process (for
``bench/price_path/line_rate.py``).

The same probe reads the product's ``prices`` and the reference's output, so the two figures are
comparable: a :class:`pricing_ha.local.tails.TopicTail` (``fetch.wait.max.ms=10``, like the
subscriber and the relay; control records skipped) from the end of every partition, taking the
wall-clock receive time after each fetch, as ``bench.price_path.hop_probe`` does. Each record's
value is JSON with the ``source_time_ns`` the feed stamped into the quote (quotes and prices both
carry it); the latency is receive time minus source time.

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

from pricing_ha.local.tails import TopicTail
from pricing_ha.subscribing.stats import percentiles


def measure(
    bootstrap: str, topic: str, partitions: int, measure_s: float, out: Path, *, skip_s: float
) -> None:
    """Follow ``topic`` for ``skip_s + measure_s``; write the latency figures to ``out``."""
    began = time.monotonic()
    lo, hi = began + skip_s, began + skip_s + measure_s
    latencies: list[float] = []
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

    tail = TopicTail(bootstrap, [topic], partitions, keep, start=OFFSET_END, name="bench-latency")
    try:
        time.sleep(max(0.0, hi - time.monotonic()))
    finally:
        tail.close()
    doc = {
        **percentiles(latencies),
        **counts,
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
