"""A relay member's partition lifecycles against a real broker: each state says what is on
``prices`` (OWNING under the takeover marker it wrote; let go with a release naming it)."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from neli.testing import FakeNeli
from pricing_ha.config import AppConfig, BrokerConfig, TopicsConfig
from pricing_ha.dedupe.control import RELEASE, TAKEOVER
from pricing_ha.dedupe.lifecycle import PartitionState
from pricing_ha.dedupe.relay import RelayStats, RelayWorker
from pricing_ha.kafka.headers import CONTROL_HEADER, header_dict
from pricing_ha.kafka.topics import create_topics, make_admin
from pricing_ha.local.waiting import wait_for
from pricing_ha.telemetry import Telemetry

M = 2
S = PartitionState


@pytest.fixture
def cfg(bootstrap: str) -> AppConfig:
    """Fresh topics on the session's broker."""
    prefix = f"lifecycle-{uuid.uuid4().hex[:8]}"
    roles = ("quotes", "neli", "raw", "prices", "dlq", "raw_dlq")
    names: dict[str, Any] = {role: f"{prefix}.{role}" for role in roles}
    topics = replace(TopicsConfig(partitions=M), **names)
    config = AppConfig(broker=BrokerConfig(bootstrap_servers=bootstrap), topics=topics)
    create_topics(make_admin(config), config)
    return config


def _markers(cfg: AppConfig, partition: int, kind: bytes) -> list[tuple[int, dict[str, str]]]:
    """The ``kind`` control records on ``prices[partition]`` (committed), in order: offset
    and headers."""
    consumer = Consumer(
        {
            "bootstrap.servers": cfg.broker.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(cfg.topics.prices, partition, OFFSET_BEGINNING)])
    found: list[tuple[int, dict[str, str]]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return found
                continue
            headers = header_dict(msg.headers())
            if headers.get(CONTROL_HEADER) == kind.decode():
                found.append((msg.offset() or 0, headers))
    finally:
        consumer.close()
    raise AssertionError(f"prices[{partition}] not read to its end within 30 s")


def test_lifecycles_follow_takeover_hand_over_and_letting_go(cfg: AppConfig) -> None:
    """OWNING under the offset of its takeover marker; a hand-over keeps that term; letting go
    returns to STANDBY and writes a release naming the term."""
    neli = FakeNeli(M, group_id="relay", member_name="r1")
    asyncio.run(neli.acquire(*range(M)))  # led at once: no grace periods
    worker = RelayWorker(cfg, "relay", "r1", neli, RelayStats(), telemetry=Telemetry.noop("test"))
    lcs = worker.lifecycles
    assert [lc.state for lc in lcs.values()] == [S.STANDBY] * M
    worker.start()
    try:
        for partition in range(M):
            worker.request("assign", partition)
        wait_for(lambda: all(lc.state is S.OWNING for lc in lcs.values()), 60, "both owned")
        terms = {p: lc.term for p, lc in lcs.items()}
        for partition, term in terms.items():
            takeovers = _markers(cfg, partition, TAKEOVER)
            assert [offset for offset, _ in takeovers] == [term]
            assert takeovers[0][1]["relay"] == "r1"

        asyncio.run(neli.revoke(0))
        worker.request("unassign", 0).wait(30)
        wait_for(lambda: lcs[0].state is S.STANDBY, 30, "partition 0 let go")
        assert lcs[0].term is None
        assert [h.get("term") for _, h in _markers(cfg, 0, RELEASE)] == [str(terms[0])]

        asyncio.run(neli.revoke(1))
        worker.request("handover", 1).wait(30)
        wait_for(lambda: lcs[1].state is not S.OWNING, 30, "partition 1 handed over")
        assert lcs[1].state in (S.HANDING_OVER, S.STANDBY)
        if lcs[1].state is S.HANDING_OVER:
            assert lcs[1].term == terms[1]  # emitting under the same term until asked
        # Nobody asks: it is let go once its bound passes (no longer assigned here).
        bound_s = worker._handovers.bound_s  # a hand-over nobody asks for goes on this long
        wait_for(lambda: lcs[1].state is S.STANDBY, bound_s + 10, "partition 1 let go")
        assert [h.get("term") for _, h in _markers(cfg, 1, RELEASE)] == [str(terms[1])]
    finally:
        worker.stop()
    assert worker.error is None
