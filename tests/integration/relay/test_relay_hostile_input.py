"""Hostile records on ``prices.raw``, against relays running as OS processes on the real broker:
only what the relay wrote reaches ``prices``, and a flood of new instrument names leaves it
alive, bounded and relaying real prices (issue 45, items 3 and 5)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from pricing_ha.dedupe.relayed import RELAYED_HEADERS
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.local.cluster import PricingCluster, Record
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.pricing import Price, decode_price, encode_price

LIMIT = 1000  # instruments per partition, in the flood test


def _price(instrument: str, seq: int) -> Price:
    return Price(instrument=instrument, seq=seq, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)


def _produce_raw(
    cluster: PricingCluster,
    producer: Producer,
    instrument: str,
    seq: int,
    headers: list[tuple[str, Any]],
    *,
    value: bytes | None = None,
) -> None:
    key = instrument.encode()
    producer.produce(
        cluster.topics["raw"],
        key=key,
        value=encode_price(_price(instrument, seq)) if value is None else value,
        partition=cluster.partition_of(key),
        headers=headers,
    )


def _prices_of(cluster: PricingCluster, instrument: str) -> list[Record]:
    return [r for r in cluster.read("prices", idle_s=0.3) if r.key == instrument.encode()]


def test_forged_headers_never_reach_prices_nor_poison_a_successors_marks(
    cluster: PricingCluster,
) -> None:
    """A valid raw price carrying a forged seq, control and unknown headers reaches prices
    with only allow-listed headers, the value's seq and its canonical value; a relay taking
    over after a hand-over starts from the value's seq, so the next seqs still flow."""
    r1 = cluster.relay("r1")
    cluster.wait_led(["relay"])
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    value = orjson.dumps({**orjson.loads(encode_price(_price("EURUSD", 1))), "x": [1, 2]})
    forged = [
        ("seq", str(2**63 - 1).encode()),
        (CONTROL_HEADER, b"release"),
        ("term", b"0"),
        ("marker", b"forger/x:1"),
        ("x-unknown", b"1"),
        ("group", b"p1"),
        ("member", b"forger"),
    ]
    _produce_raw(cluster, producer, "EURUSD", 1, forged, value=value)
    _produce_raw(cluster, producer, "USDJPY", 1, [(CONTROL_HEADER, b"takeover"), ("seq", b"9")])
    assert producer.flush(10) == 0

    wait_for(
        lambda: len(_prices_of(cluster, "EURUSD")) == 1,
        60,
        lambda: f"EURUSD seq 1 on prices: dlq {cluster.read('raw_dlq')}, {r1.log_tail()}",
    )
    wait_for(lambda: len(_prices_of(cluster, "USDJPY")) == 1, 60, "USDJPY seq 1 on prices")
    for instrument in ("EURUSD", "USDJPY"):
        [record] = _prices_of(cluster, instrument)
        assert set(record.headers) <= set(RELAYED_HEADERS), record.headers
        assert record.headers["seq"] == "1"
        assert record.value == encode_price(_price(instrument, 1))
    assert r1.alive()

    # A planned hand-over: r2's marks come from its standby tail of prices.
    r2 = cluster.relay("r2")
    wait_for(r2.alive, 10, "r2 to start")
    r1.terminate()
    assert r1.wait(60) == 0, "SIGTERM must end the relay cleanly"
    cluster.wait_led(["relay"])
    for seq in (2, 3):
        _produce_raw(cluster, producer, "EURUSD", seq, [("group", b"p2"), ("member", b"b")])
    assert producer.flush(10) == 0
    wait_for(
        lambda: [r.headers["seq"] for r in _prices_of(cluster, "EURUSD")] == ["1", "2", "3"],
        60,
        "EURUSD seqs 2 and 3 relayed by the successor (a poisoned mark would drop them)",
    )
    assert r2.alive()


@pytest.fixture
def cluster_env() -> dict[str, str]:
    """A small instrument limit, so that the flood fills every partition."""
    return {"PRICING_HA__LIMITS__MAX_INSTRUMENTS_PER_PARTITION": str(LIMIT)}


def test_a_flood_of_new_instruments_leaves_the_relay_alive_bounded_and_relaying(
    cluster: PricingCluster,
) -> None:
    """20,000 new instrument names mid-run: the relay stays up, admits at most the limit per
    partition, dead-letters the rest with a reason, and the feed's prices arrive exactly once."""
    relay = cluster.relay("r1")
    cluster.publisher("p1", "a")
    cluster.wait_led(["p1", "relay"])
    feed = cluster.feed(instruments=8, rate=10, duration=12)
    wait_for(lambda: len(cluster.read("prices", idle_s=0.3, live=True)) >= 8, 60, "prices flowing")

    flood = 20_000
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
    for i in range(flood):
        _produce_raw(cluster, producer, f"FLOOD{i:05d}", 1, [("group", b"x"), ("member", b"y")])
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0

    def refused() -> int:
        return sum(
            1
            for r in cluster.read("raw_dlq", idle_s=0.3, live=True)
            if r.headers.get("reason", "").startswith("instrument limit")
        )

    # Every flood record is relayed or refused; at most LIMIT instruments per partition.
    least_refused = flood - cluster.partitions * LIMIT
    wait_for(lambda: refused() >= least_refused, 120, f"at least {least_refused} refusals")
    assert feed.wait(120) == 0
    expected = cluster.expected()

    def delivered() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for r in cluster.read("prices", idle_s=0.5):
            assert r.key is not None
            assert r.value is not None
            out.setdefault(r.key.decode(), []).append(decode_price(r.value).seq)
        return out

    wait_for(
        lambda: all(delivered().get(i) == list(range(1, last + 1)) for i, last in expected.items()),
        120,
        "every feed seq exactly once on prices",
    )
    got = delivered()
    admitted = [k for k in got if k.startswith("FLOOD")]
    per_partition: dict[int, int] = {}
    for k in [*admitted, *expected]:
        p = cluster.partition_of(k.encode())
        per_partition[p] = per_partition.get(p, 0) + 1
    assert max(per_partition.values()) <= LIMIT, per_partition
    assert len(admitted) + refused() == flood
    assert relay.alive(), "the flood must not stop the relay"
