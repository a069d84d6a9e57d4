"""The standalone subscriber client on the real broker, behind publishers, a relay and the feed.

Judged from the data: what the clients handed out against what ``prices`` holds and what the
feed says it produced.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.kafka.partitioning import instrument_partition
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.pricing import Price as WirePrice
from pricing_ha.publishing.pricing import encode_price
from pricing_ha.subscribing.client import Gap, Price, PriceClient

EXAMPLE = Path(__file__).parents[3] / "examples" / "python-subscriber.py"
INSTRUMENTS = 8
TICK_S = 0.1
FEED_S = 8.0


async def _collect(client: PriceClient, out: list[Price], until: float) -> None:
    """Hand the client's prices to ``out`` until monotonic time ``until``."""
    while time.monotonic() < until:
        out += await client.poll(0.1)


def _flowing(cluster: PricingCluster) -> bool:
    keys = {r.key for r in cluster.read("prices", idle_s=0.3, live=True) if r.key is not None}
    return len(keys) == INSTRUMENTS


async def test_filter_last_values_and_resume_hand_out_every_seq_once(
    cluster: PricingCluster,
) -> None:
    """A filtered client gets one partition, one instrument's last value then every later seq;
    an unfiltered client committing to a group, then its successor, and a client resuming
    from positions get every seq once; the example prints a last value."""
    cluster.publisher("p1", "a")
    cluster.publisher("p2", "a")
    cluster.relay("r1")
    cluster.wait_led(["p1", "p2", "relay"])
    feed = cluster.feed(instruments=INSTRUMENTS, rate=1 / TICK_S, duration=FEED_S)
    wait_for(lambda: _flowing(cluster), 30, "every instrument on prices")

    by_partition: dict[int, list[str]] = {}
    for r in cluster.read("prices", idle_s=0.3, live=True):
        if r.key is not None and r.key.decode() not in by_partition.get(r.partition, []):
            by_partition.setdefault(r.partition, []).append(r.key.decode())
    shared = max(by_partition.values(), key=len)  # a partition with neighbours to filter out
    wanted = shared[0]
    gaps: list[Gap] = []
    bootstrap, topic, group = cluster.bootstrap, cluster.topics["prices"], cluster.group("client")
    one = PriceClient(bootstrap, topic, instruments=[wanted], on_gap=gaps.append)
    every = PriceClient(bootstrap, topic, group_id=group, on_gap=gaps.append)
    got_one: list[Price] = []
    got_every: list[Price] = []
    async with one, every:
        assert one.assigned == (instrument_partition(wanted, cluster.partitions),)
        assert every.assigned == tuple(range(cluster.partitions))
        until = time.monotonic() + 3.0
        await asyncio.gather(_collect(one, got_one, until), _collect(every, got_every, until))
        await every.commit()
    assert feed.wait(60) == 0, feed.log_tail()
    expected = cluster.expected()
    resumed: list[Price] = []
    async with PriceClient(bootstrap, topic, group_id=group, on_gap=gaps.append) as successor:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            resumed += await successor.poll(0.2)
            newest = {p.instrument: p.seq for p in got_every + resumed}
            if newest == expected:
                break

    # The filtered client: its one instrument, from its one partition (where the publishers
    # and the relay put it), its last value first, then every later seq once.
    assert {p.instrument for p in got_one} == {wanted}, "neighbours on the partition dropped"
    everywhere = {r.partition for r in cluster.read("prices") if r.key == wanted.encode()}
    assert everywhere == {instrument_partition(wanted, cluster.partitions)}
    assert got_one[0].last_value
    assert not any(p.last_value for p in got_one[1:])
    first = got_one[0].seq
    assert [p.seq for p in got_one] == list(range(first, first + len(got_one)))
    assert len(got_one) > 10, "live prices followed the last value"
    # Unfiltered, then resumed from the group's commit: each instrument's last value on
    # connect, then every seq up to the feed's last exactly once.
    firsts = {p.instrument: p for p in reversed(got_every)}
    assert set(firsts) == set(expected), "a last value of every instrument on connect"
    assert all(p.last_value for p in firsts.values())
    counts = Counter((p.instrument, p.seq) for p in got_every + resumed)
    assert max(counts.values()) == 1, "no seq handed out twice"
    for name, last in expected.items():
        assert {s for (i, s) in counts if i == name} == set(range(firsts[name].seq, last + 1))
    assert resumed
    assert not any(p.last_value for p in resumed), "resumed, not restarted"
    # The filtered client's positions: a new client resumes right after its last price.
    after: list[Price] = []
    async with PriceClient(bootstrap, topic, instruments=[wanted], positions=one.positions()) as c:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not after or after[-1].seq < expected[wanted]):
            after += await c.poll(0.2)
    assert [p.seq for p in after] == list(range(got_one[-1].seq + 1, expected[wanted] + 1))
    assert gaps == []
    # The example, run as documented, prints the instrument's last price.
    example = cluster.procs.spawn(
        "example", [sys.executable, str(EXAMPLE), bootstrap, topic, wanted]
    )
    try:
        line = f"{wanted} {expected[wanted]} "
        wait_for(lambda: line in example.log_path.read_text(), 30, f"the example to print {line!r}")
        assert "last value" in example.log_tail()
    finally:
        example.stop(grace_s=5)


_Record = tuple[bytes | None, bytes, list[tuple[str, str | bytes | None]]]  # key, value, headers


def _price(instrument: str, seq: int) -> bytes:
    return encode_price(
        WirePrice(instrument=instrument, seq=seq, bid=1.0, ask=1.2, mid=1.1, source_time_ns=1)
    )


async def test_aborted_open_and_control_records_are_never_handed_out(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """read_committed: an aborted price never appears, an open transaction's price comes once
    it commits (live starts at the last stable offset), control records are skipped."""
    topic = topic_factory(1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)

    def transaction(*values: _Record) -> None:
        producer.begin_transaction()
        for key, value, headers in values:
            producer.produce(topic, value, key, partition=0, headers=headers)
        producer.flush(10)

    control: _Record = (None, b"", [(CONTROL_HEADER, b"takeover")])
    transaction((b"X", _price("X", 1), []), control, (b"X", _price("X", 2), []))
    producer.commit_transaction(30)
    transaction((b"X", _price("X", 99), []))
    producer.abort_transaction(30)
    transaction((b"X", _price("X", 3), []))  # left open while the client connects
    gaps: list[Gap] = []
    async with PriceClient(bootstrap, topic, on_gap=gaps.append) as client:
        got = await client.poll(0)
        assert [(p.seq, p.last_value) for p in got] == [(2, True)]
        await asyncio.to_thread(producer.commit_transaction, 30)
        transaction(control, (b"X", _price("X", 4), []))
        await asyncio.to_thread(producer.commit_transaction, 30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not got or got[-1].seq < 4):
            got += await client.poll(0.2)
    assert [(p.seq, p.last_value) for p in got] == [(2, True), (3, False), (4, False)]
    assert (gaps, client.invalid, client.duplicates) == ([], 0, 0)
