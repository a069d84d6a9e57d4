"""The feed-rate benchmark on a real broker: what its watermark count says the feed delivered."""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict

import pytest

from bench.price_path.feed_pace import step_figures
from bench.price_path.feed_rate import Watch
from pricing_ha.config import AppConfig, BrokerConfig, TopicsConfig
from pricing_ha.feed.producer import run_feed
from pricing_ha.feed.sources import SyntheticMarket, default_symbols
from pricing_ha.local.cluster import read_topic
from pricing_ha.publishing.quotes import encode_quote, parse_quote
from tests.conftest import TopicFactory

pytestmark = pytest.mark.integration

N = 6_000
RATE = 4_000.0
PARTITIONS = 4


def test_watermarks_count_every_quote_the_feed_sent_once_with_its_bytes(
    bootstrap: str, topic_factory: TopicFactory
) -> None:
    """The paced feed's quotes are all on the topic, once each, in seq order per instrument,
    with the bytes the synthetic market encodes; the benchmark's count and CPU agree."""
    topic = topic_factory(PARTITIONS)
    cfg = AppConfig(
        broker=BrokerConfig(bootstrap_servers=bootstrap),
        topics=dataclasses.replace(TopicsConfig(), quotes=topic, partitions=PARTITIONS),
    )
    watch = Watch(bootstrap, topic, PARTITIONS, interval_s=0.05)
    watch.watch("feed", os.getpid())
    ticks = iter(range(1, 10 * N))
    try:
        market = SyntheticMarket(default_symbols(20), 3, 1)
        summary = run_feed(cfg, market.quotes(lambda: next(ticks)), rate_hz=RATE, count=N)
    finally:
        watch.close()
    assert summary.ok
    assert summary.delivered == N
    step = step_figures(
        watch.samples, n=N, offered_per_s=RATE, started=watch.samples[0].t, warm_s=0.5,
        process="feed",
    )  # fmt: skip
    assert step["complete"]
    assert step["landed"] == N
    assert step["cpu"]["cpu_s"] is not None
    assert step["cpu"]["cpu_s"] > 0

    records = read_topic(bootstrap, topic, PARTITIONS)
    assert len(records) == N
    seqs: dict[str, list[int]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        assert r.value is not None
        seqs[r.key.decode()].append(parse_quote(r.value, r.key).seq)
    assert all(s == list(range(1, len(s) + 1)) for s in seqs.values())
    ticks = iter(range(1, 10 * N))
    again = SyntheticMarket(default_symbols(20), 3, 1).quotes(lambda: next(ticks))
    expected = {encode_quote(next(again)) for _ in range(N)}
    assert {r.value for r in records} == expected
