"""The relay takeover benchmark's reader of prices on a real broker: what it keeps and what it
judges."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from bench.common.topic_gaps import PricesTail
from bench.relay_failover.checks import takeovers_in, zombie_records
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.local.waiting import wait_for
from tests.conftest import TopicFactory

pytestmark = pytest.mark.integration


def _price(producer: Producer, topic: str, relay: str, seq: int) -> None:
    value = b'{"instrument":"A","seq":%d}' % seq
    producer.produce(topic, key=b"A", value=value, partition=0, headers=[("relay", relay)])


def test_a_zombies_committed_write_counts_and_its_aborted_one_is_never_seen(
    bootstrap: str, topic_factory: TopicFactory
) -> None:
    """The tail reads read_committed, keeps control records, and judges zombies from both."""
    topic = topic_factory(1)
    plain = Producer({"bootstrap.servers": bootstrap})
    tail = PricesTail(bootstrap, topic, 1, skip="OLD")
    try:
        stop_ms = time.time() * 1000 - 1000  # record timestamps are whole ms
        _price(plain, topic, "r1", 1)  # the stopped relay's last record before the successor
        control: list[tuple[str, str | bytes | None]] = [
            (CONTROL_HEADER, "takeover"),
            ("relay", "r2"),
        ]
        plain.produce(topic, key=None, value=b"", partition=0, headers=control)
        _price(plain, topic, "r2", 2)  # the successor's first price
        plain.flush(10)
        zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
        zombie.init_transactions(10)
        zombie.begin_transaction()
        _price(zombie, topic, "r1", 3)  # refused in the end: a reader never sees it
        zombie.abort_transaction(10)
        zombie.begin_transaction()
        _price(zombie, topic, "r1", 4)  # a late write that became visible
        zombie.commit_transaction(10)
        _price(plain, topic, "r2", 5)
        plain.flush(10)
        wait_for(lambda: len(tail.records[0]) >= 4, 30, "the tail to read the prices")
        recs, controls = list(tail.records[0]), list(tail.controls[0])
    finally:
        tail.close()
    assert [r[2] for r in recs] == ["r1", "r2", "r1", "r2"]  # the aborted price is not there
    assert [(c[2], c[3]) for c in controls if c[3] == "takeover"] == [("r2", "takeover")]
    assert zombie_records(recs, controls, "r1", stop_ms) == 1
    assert len(takeovers_in(controls, stop_ms, time.time() * 1000)) == 1
