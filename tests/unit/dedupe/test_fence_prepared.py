"""A takeover initialises the producer prepared for it, which connected meanwhile."""

from __future__ import annotations

from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Producer

from pricing_ha.dedupe.fences import Fences
from tests.unit.dedupe.test_fence_failures import TxnProducer


class SlowToConnect(TxnProducer):
    """A producer whose ``init_transactions`` times out until it has connected (the test says
    when: a fresh producer on a loaded machine took longer than an attempt's 150 ms)."""

    made: list[SlowToConnect] = []  # noqa: RUF012 - every producer made, in order

    def __init__(self, settings: dict[str, Any]) -> None:
        """Not connected yet."""
        super().__init__(settings)
        self.connected = False
        self.initialised = False
        SlowToConnect.made.append(self)

    def init_transactions(self, timeout: float = -1) -> None:
        """Registered once connected, else timed out."""
        if not self.connected:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "not connected yet"))
        self.initialised = True


def _fences() -> Fences:
    SlowToConnect.made = []
    return Fences(
        {},
        id_prefix="pricing.relay",
        client_prefix="relay-r1-prices",
        make=lambda settings: cast(Producer, SlowToConnect(settings)),
        on_lost=lambda _p: None,
        workers=0,
    )


def test_a_takeover_uses_the_producer_prepared_at_its_probe() -> None:
    """Prepared at the probe, the producer has connected by the takeover: it is the one
    initialised, at the first attempt, and no fresh producer is made."""
    fences = _fences()
    fences.prepare([2])
    assert [p.initialised for p in SlowToConnect.made] == [False], "initialised too early"
    for producer in SlowToConnect.made:
        producer.connected = True  # while the old owner releases the partition
    assert fences.fence([2], 0.3) == {2}
    assert len(SlowToConnect.made) == 1, "a fresh producer was made for the takeover"
    assert SlowToConnect.made[0].initialised
    assert SlowToConnect.made[0].config["transactional.id"] == "pricing.relay.2"


def test_producers_prepared_for_partitions_not_taken_over_are_let_go() -> None:
    """A prepared producer whose partition is neither kept nor taken over is let go; the
    next takeover of that partition makes a fresh one."""
    fences = _fences()
    fences.prepare([1, 2])
    fences.unprepare(keep={2})
    for producer in SlowToConnect.made:
        producer.connected = True
    assert fences.fence([1, 2], 0.3) == {2}, "partition 1 took a let-go producer"
