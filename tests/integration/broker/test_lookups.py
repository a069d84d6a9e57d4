"""On Apache Kafka, a consumer whose own look-ups of committed offsets time out gets them from a
new client of its group, built from its own settings."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from pricing_ha.kafka import lookups
from pricing_ha.kafka.lookups import LookupConsumer


def test_timed_out_look_ups_are_answered_by_a_new_client_of_the_group(
    bootstrap: str,
    topic_factory: Callable[[int], str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Offsets committed by one consumer are read back through the new client, once the
    consumer's own look-ups (given no time at all) have timed out past FRESH_AFTER_S; its own
    look-up answered again ends the detour."""
    topic = topic_factory(2)
    group = f"{topic}-lookups"
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committer.commit(
            offsets=[TopicPartition(topic, 0, 17), TopicPartition(topic, 1, 4)],
            asynchronous=False,
        )
    finally:
        committer.close()
    monkeypatch.setattr(lookups, "FRESH_AFTER_S", 0.0)
    monkeypatch.setattr(lookups, "FRESH_TIMEOUT_S", 20.0)  # a loaded CI machine's connect
    consumer = LookupConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "looked-up"}
    )
    wanted = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    try:
        with caplog.at_level(logging.INFO, logger="pricing_ha.kafka"):
            # 1 µs: the consumer's own look-up cannot even find its coordinator in time.
            got = consumer.committed(wanted, 1e-6)
            detour = [r.getMessage() for r in caplog.records]
            caplog.clear()
            again = consumer.committed(wanted, 20.0)  # its own, given time
            after = [r.getMessage() for r in caplog.records]
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset, tp.error) for tp in got] == [(0, 17, None), (1, 4, None)]
    assert any("a new client of the group answered" in m for m in detour), detour
    assert [(tp.partition, tp.offset) for tp in again] == [(0, 17), (1, 4)]
    assert any("looked-up: committed offsets answered again" in m for m in after), after
