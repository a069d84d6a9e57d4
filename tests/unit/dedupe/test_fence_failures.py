"""A fenced partition's failed commit reaches the hot path every time, not only the first."""

from __future__ import annotations

from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Producer

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.stats import RelayStats
from tests.unit.kafka.producer_fakes import FakeProducer


class TxnProducer(FakeProducer):
    """A transactional fake whose commits fail once ``fenced`` is set."""

    fenced = False

    def init_transactions(self, timeout: float = -1) -> None:
        """Registered at once."""

    def begin_transaction(self) -> None:
        """Begun at once."""

    def commit_transaction(self, timeout: float = -1) -> None:
        """Committed, unless a successor fenced this producer."""
        if TxnProducer.fenced:
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance"))


def test_every_fenced_commit_is_reported_as_failed_output() -> None:
    """The second fenced commit is reported too (it went to a discarded set: prices lost)."""
    TxnProducer.fenced = False

    def factory(settings: dict[str, Any]) -> Producer:
        return cast(Producer, TxnProducer(settings))

    producers = OutputProducers(
        AppConfig(), "r1", "pricing.relay.raw", stats=RelayStats(), producer_factory=factory
    )
    fences = producers.fences
    for round_ in range(3):
        TxnProducer.fenced = False
        assert fences.fence([0], 1.0) == {0}
        assert fences.begin(0) is not None
        TxnProducer.fenced = True
        assert fences.commit_open() == {0}
        assert producers.take_failed() == {0}, f"round {round_}: the failure was not reported"
    TxnProducer.fenced = False
