"""A consumer whose own look-ups of committed offsets keep timing out asks a new client."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition

from pricing_ha.kafka import lookups
from pricing_ha.kafka.lookups import LookupConsumer


class FakeLookupClient:
    """A new client of the group: answers committed offsets, records how it was made."""

    def __init__(self, settings: dict[str, Any], offsets: dict[int, int]) -> None:
        self.settings = settings
        self.offsets = offsets
        self.closed = threading.Event()

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.offsets[tp.partition]) for tp in partitions
        ]

    def close(self) -> None:
        self.closed.set()


def _unanswered_bootstrap() -> str:
    """An address on which nothing listens: every look-up of the consumer's own times out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def made() -> list[FakeLookupClient]:
    """The look-up clients a test's consumer made, in order."""
    return []


@pytest.fixture
def consumer(made: list[FakeLookupClient]) -> Any:
    """A LookupConsumer of group g whose own look-ups time out, with fake look-up clients."""

    def make(settings: dict[str, Any]) -> FakeLookupClient:
        made.append(FakeLookupClient(settings, {0: 41, 1: 7}))
        return made[-1]

    c = LookupConsumer(
        {
            "bootstrap.servers": _unanswered_bootstrap(),
            "group.id": "g",
            "client.id": "relay-r1-raw",
            "statistics.interval.ms": 1000,
            "stats_cb": lambda s: None,
            "log_level": 0,
        },
        make=make,
    )
    yield c
    c.close()


def test_a_first_timeout_is_raised_without_asking_a_new_client(
    consumer: LookupConsumer, made: list[FakeLookupClient]
) -> None:
    """Look-ups timing out for less than FRESH_AFTER_S raise as a plain consumer's do."""
    with pytest.raises(KafkaException):
        consumer.committed([TopicPartition("t", 0)], timeout=0.1)
    assert made == []


def test_look_ups_timing_out_long_enough_are_answered_by_a_new_client(
    consumer: LookupConsumer, made: list[FakeLookupClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past FRESH_AFTER_S of timeouts, the answer comes from a new client of the same group
    (no statistics, its own client id), which is closed; later look-ups ask one again."""
    with pytest.raises(KafkaException):
        consumer.committed([TopicPartition("t", 0)], timeout=0.1)
    monkeypatch.setattr(lookups, "FRESH_AFTER_S", 0.0)
    got = consumer.committed([TopicPartition("t", 0), TopicPartition("t", 1)], timeout=0.1)
    assert [(tp.partition, tp.offset) for tp in got] == [(0, 41), (1, 7)]
    assert len(made) == 1
    settings = made[0].settings
    assert settings["group.id"] == "g"
    assert settings["client.id"] == "relay-r1-raw-lookup"
    assert "stats_cb" not in settings
    assert "statistics.interval.ms" not in settings
    assert made[0].closed.wait(5)
    consumer.committed([TopicPartition("t", 1)], timeout=0.1)
    assert len(made) == 2
