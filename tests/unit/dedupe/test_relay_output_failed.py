"""A partition whose output to ``prices`` failed is dropped, led or handed over alike."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from tests.unit.dedupe.relay_hot_path import Relay


@pytest.mark.parametrize("handing_over", [False, True])
def test_a_partition_whose_output_failed_is_dropped(handing_over: bool) -> None:
    """Output not acknowledged: the partition is dropped at the end of the batch (a takeover,
    fencing anew, takes it up again), also while it is being handed over: nothing starts it
    over in place under its old term."""
    relay = Relay(handing_over=handing_over)
    relay.hot.process([relay.raw("EURUSD", 1)])
    assert relay.dropped == []
    relay.producers.mark_failed({0})
    relay.hot.process([relay.raw("EURUSD", 2)])
    assert relay.dropped == [0]


def test_a_fenced_producer_refusing_a_record_drops_the_partition_instead_of_the_worker() -> None:
    """A fenced transactional producer raises on produce (librdkafka's fatal error): the
    partition is dropped and nothing is committed; the worker lives (it died of it, and with it
    every partition the relay held)."""
    relay = Relay()
    relay.hot.process([relay.raw("EURUSD", 1)])
    fence = relay.built[-1]

    def refuse(topic: str, **kwargs: object) -> None:
        raise KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message"))

    fence.produce = refuse  # type: ignore[method-assign]
    relay.hot.process([relay.raw("EURUSD", 2)])
    assert relay.dropped == [0]
