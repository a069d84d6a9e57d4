"""Hostile records written into a running publisher and relay: dead-lettered, and prices go on.

The drill's records: a 600 KB invalid quote on ``md.quotes`` (its dead letter was twice its
size and both publishing groups crash-looped on it), and raw prices on ``prices.raw`` whose
headers are not UTF-8 or whose ``publish_ns`` is "²" (the relay's worker died on each, and so
did every successor). Judged from the topics and the committed positions.
"""

from __future__ import annotations

from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from pricing_ha.dedupe.relay_clients import raw_group_id
from pricing_ha.kafka.dead_letter import MAX_REASON_BYTES, PAYLOAD_CAP_BYTES
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.pricing import Price, encode_price
from pricing_ha.publishing.quote_worker import quotes_group_id

SYM = "EURUSD"


def _quote(seq: int) -> bytes:
    return orjson.dumps(
        {"instrument": SYM, "seq": seq, "bid": 1.1, "ask": 1.1002, "source_time_ns": 1}
    )


def _produce(producer: Producer, topic: str, **record: Any) -> int:
    """Produce one record and return its offset."""
    got: list[Message] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        got.append(msg)

    producer.produce(topic, on_delivery=delivered, **record)
    assert producer.flush(15) == 0
    offset = got[0].offset()
    assert offset is not None
    return offset


def _committed(bootstrap: str, group: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition(topic, partition)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def test_hostile_records_are_dead_lettered_and_prices_keep_flowing(
    cluster: PricingCluster,
) -> None:
    """A 600 KB invalid quote and raw prices with non-UTF-8 headers or a "²" publish_ns land
    on the dead-letter topics with bounded reasons; no process exits, the quotes after them
    are priced and relayed, and both roles commit past them."""
    publisher = cluster.publisher("p1", "a")
    relay = cluster.relay("r1")
    cluster.wait_led(["p1", "relay"])
    topics = cluster.topics
    partition = cluster.partition_of(SYM.encode())
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})

    def quote(value: bytes) -> int:
        return _produce(
            producer, topics["quotes"], key=SYM.encode(), value=value, partition=partition
        )

    quote(_quote(1))
    huge = orjson.dumps(
        {"instrument": SYM, "seq": 2, "bid": "x" * 600_000, "ask": 1.2, "source_time_ns": 1}
    )
    huge_at = quote(huge)
    # Raw prices of an instrument of their own, valid values, hostile headers.
    value = encode_price(
        Price(instrument=SYM, seq=10_000, bid=1.0, ask=1.1, mid=1.05, source_time_ns=1)
    )
    hostile_at = [
        _produce(
            producer,
            topics["raw"],
            key=SYM.encode(),
            value=value,
            partition=partition,
            headers=headers,
        )
        for headers in (
            [("group", b"\xff\xfe"), ("member", b"x"), ("publish_ns", b"1")],
            [("group", b"p9"), ("member", b"x"), ("publish_ns", "²".encode())],
        )
    ]
    for seq in (2, 3, 4):
        quote(_quote(seq))

    def relayed() -> bool:
        seqs = [int(r.headers["seq"]) for r in cluster.read("prices", idle_s=0.3)]
        return seqs == [1, 2, 3, 4]

    wait_for(relayed, 60, "the quotes around the hostile records to reach prices, once each")

    dlq = cluster.read("dlq")
    assert len(dlq) == 1
    letter = dlq[0]
    assert len(letter.headers["reason"].encode()) <= MAX_REASON_BYTES
    assert "bid" in letter.headers["reason"]
    assert letter.headers["truncated"] == "true"
    assert letter.headers["original.value.size"] == str(len(huge))
    assert letter.headers["source.offset"] == str(huge_at)
    assert len(letter.value or b"") == PAYLOAD_CAP_BYTES

    raw_dlq = cluster.read("raw_dlq")
    assert sorted(int(r.headers["source.offset"]) for r in raw_dlq) == hostile_at
    reasons = sorted(r.headers["reason"] for r in raw_dlq)
    assert all(len(r.encode()) <= MAX_REASON_BYTES for r in reasons)
    assert any("UTF-8" in r for r in reasons)
    assert any("publish_ns" in r for r in reasons)

    def committed_past() -> bool:
        quotes_at = _committed(
            cluster.bootstrap, quotes_group_id(cluster.group("p1")), topics["quotes"], partition
        )
        raw_at = _committed(
            cluster.bootstrap, raw_group_id(cluster.group("relay")), topics["raw"], partition
        )
        return quotes_at > huge_at and raw_at > max(hostile_at)

    wait_for(committed_past, 30, "both roles to commit past the hostile records")
    assert publisher.alive(), publisher.log_tail(30)
    assert relay.alive(), relay.log_tail(30)
