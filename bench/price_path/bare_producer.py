"""The reference of ``bench/price_path/feed_rate.py``: a bare confluent-kafka producer loop.

It produces ``COUNT`` records, unpaced, to the quotes topic of a pricing configuration file, with
the feed's own producer settings (``PRODUCER_DEFAULTS`` and ``PRODUCER_REQUIRED`` through the
configuration, as :func:`pricing_ha.feed.producer.run_feed` builds them) and records of the same
sizes and keys: the encoded quotes of the same synthetic market (instruments, seed), made before
the loop starts and cycled. The loop is the textbook one: ``produce`` (a full local queue: poll
and retry), ``poll(0)``, a producer-level delivery callback that counts failures, a final flush.
No quote objects, no per-message callback, no pacing, no summary.

It prints one JSON line: records, failures, seconds and CPU seconds of the loop and the flush.

Run: ``python -m bench.price_path.bare_producer CONFIG COUNT INSTRUMENTS``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from pricing_ha.config import load_config
from pricing_ha.feed.producer import PRODUCER_DEFAULTS, PRODUCER_REQUIRED
from pricing_ha.feed.sources import SyntheticMarket, default_symbols
from pricing_ha.publishing.quotes import encode_quote

#: Distinct records made up front and cycled (their sizes are the feed's).
DISTINCT = 20_000


def records(instruments: int, seed: int, epoch: int) -> list[tuple[str, bytes]]:
    """(key, value) of the first :data:`DISTINCT` quotes the feed would send."""
    market = SyntheticMarket(default_symbols(instruments), seed, epoch)
    return [(q.instrument, encode_quote(q)) for q in itertools.islice(market.quotes(), DISTINCT)]


def main() -> None:
    """Produce, flush, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("count", type=int)
    parser.add_argument("instruments", type=int)
    args = parser.parse_args()
    cfg = load_config(args.config)
    settings = cfg.broker.client_config(defaults=PRODUCER_DEFAULTS, required=PRODUCER_REQUIRED)
    failed = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    recs = records(args.instruments, cfg.feed.seed, time.time_ns() // 1_000_000)
    producer = Producer({**settings, "on_delivery": delivered})
    topic, m = cfg.topics.quotes, len(recs)
    t0, c0 = time.monotonic(), time.process_time()
    for i in range(args.count):
        key, value = recs[i % m]
        while True:
            try:
                producer.produce(topic, value, key)
            except BufferError:
                producer.poll(0.1)
            else:
                break
        producer.poll(0)
    t1 = time.monotonic()
    left = producer.flush(float(settings["message.timeout.ms"]) / 1000 + 5)
    t2, c2 = time.monotonic(), time.process_time()
    print(
        json.dumps(
            {
                "records": args.count,
                "failed": failed,
                "unflushed": left,
                "loop_s": round(t1 - t0, 3),
                "flush_s": round(t2 - t1, 3),
                "cpu_s_loop_and_flush": round(c2 - c0, 3),
                "settings": {k: v for k, v in settings.items() if k != "bootstrap.servers"},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
