"""The owners of a replaceable producer: the relay output starts over what failed once a replaced
producer's broker answers, a member is not ready while its output has a problem, and every
producer sends one request at a time unless configured otherwise."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.output import RelayOutput
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.kafka.producers import (
    ReplaceableProducer,
)
from pricing_ha.local.waiting import wait_for
from pricing_ha.member.runner import WorkerMember
from pricing_ha.member.worker import PartitionWorker
from pricing_ha.telemetry import Telemetry

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from neli import Neli
from tests.unit.kafka.producer_fakes import FakeError, FakeProducer, make, timed_out


class AnsweringProducer(FakeProducer):
    """A fake whose broker answers metadata requests only once told to."""

    answers = False

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        """Metadata, or the error librdkafka raises when the broker does not answer in time."""
        if not AnsweringProducer.answers:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return object()


def test_relay_output_replaces_a_wedged_producer_and_resumes_once_the_broker_answers() -> None:
    """Every partition with purged or failed output starts over, after the broker answers."""
    stats = RelayStats()
    producers = OutputProducers(AppConfig(), "r1", "pricing.relay.raw", stats=stats)
    out = RelayOutput(
        AppConfig(),
        "r1",
        "pricing.relay.raw",
        producers,
        lambda _p: True,
        stats=stats,
        telemetry=Telemetry.noop("test"),
    )
    built: list[FakeProducer] = []

    def factory(cfg: dict[str, Any]) -> Producer:
        built.append(AnsweringProducer(cfg))
        return cast(Producer, built[-1])  # the fake stands in for the relay's concrete producer

    producers.producer = ReplaceableProducer(
        {"enable.idempotence": True}, name="relay", logger=logging.getLogger("t"), factory=factory
    )
    AnsweringProducer.answers = False
    for partition in (0, 1):  # e.g. probes: records of the relay's idempotent producer
        producers.producer.produce(
            "prices", partition=partition, value=b"?", on_delivery=producers.on_delivery
        )
    built[0].settle(timed_out())  # partition 0's record timed out; partition 1's is in flight
    assert producers.may_resume()  # nothing replaced yet
    assert out.flush({}) == {0, 1}  # 1's record was purged with the old producer
    assert stats.producer_replacements == 1
    assert producers.problem is not None
    assert not producers.may_resume()  # the broker has not answered the new producer
    AnsweringProducer.answers = True
    assert wait_for(producers.may_resume, 1.0, "the probe to be asked again", interval_s=0.02)


def test_readiness_fails_while_the_worker_reports_an_output_problem() -> None:
    """A member whose worker cannot deliver its output is not ready, and says why."""

    class Worker(PartitionWorker):
        problem: str | None = None

        def assign(self, partition: int) -> None:
            """Nothing to assign."""

        def unassign(self, partition: int) -> None:
            """Nothing to unassign."""

        def process(self, batch: list[Message]) -> None:
            """Nothing to process."""

        def output_problem(self) -> str | None:
            """The scripted problem."""
            return self.problem

    worker = Worker("w", cast("Consumer", None), lambda _p: True)
    member = WorkerMember(cast("Neli", SimpleNamespace(add_barrier=lambda _h: None)), worker)
    member._started = True  # as after start(): NELI joined
    assert member.readiness()
    worker.problem = "replaced after _MSG_TIMED_OUT; no delivery since"
    with pytest.raises(RuntimeError, match="output cannot be delivered: replaced after"):
        member.readiness()


def test_producers_send_one_request_at_a_time_unless_configured_otherwise() -> None:
    """One request in flight by default (more makes a slowly answered idempotent producer
    spin), and the replacement gets it too; a configuration may still ask for more."""
    slot, built = make({"enable.idempotence": True})
    assert built[0].config["max.in.flight.requests.per.connection"] == 1
    slot.replace("test")
    assert built[-1].config["max.in.flight.requests.per.connection"] == 1
    _, built = make({"max.in.flight.requests.per.connection": 5})
    assert built[0].config["max.in.flight.requests.per.connection"] == 5


def test_the_relays_fencing_producers_also_send_one_request_at_a_time() -> None:
    """The per-partition transactional producers (the relay's fences) get the same default as
    every other producer of the pipeline."""
    configs: list[dict[str, Any]] = []

    def factory(cfg: dict[str, Any]) -> Any:
        configs.append(cfg)
        return SimpleNamespace(init_transactions=lambda _timeout: None)

    cfg = AppConfig()
    out = OutputProducers(
        cfg, "r1", "pricing.relay.raw", stats=RelayStats(), producer_factory=factory
    )
    assert out.fences.fence([0], 1.0) == {0}
    fence_config = configs[-1]
    assert fence_config["transactional.id"] == out.fences.transactional_id(0)
    assert fence_config["max.in.flight.requests.per.connection"] == 1


def test_relay_output_failing_for_good_again_backs_off_before_starting_over() -> None:
    """A partition whose output the broker refused for good starts over at once the first
    time; refused again, not before a backoff; a timeout never delays it."""
    producers = OutputProducers(AppConfig(), "r1", "pricing.relay.raw", stats=RelayStats())
    refused = Message(topic="prices", partition=3, offset=-1, key=b"K", value=b"v")

    def fail(err: object) -> set[int]:
        producers.on_delivery(err, refused)  # type: ignore[arg-type]
        return producers.take_failed()

    assert fail(FakeError(KafkaError.TOPIC_AUTHORIZATION_FAILED)) == {3}
    assert producers.may_resume()  # the first time: at once
    assert fail(FakeError(KafkaError.TOPIC_AUTHORIZATION_FAILED)) == {3}
    assert not producers.may_resume()
    assert wait_for(producers.may_resume, 2.0, "the backoff to end", interval_s=0.02)
    assert fail(timed_out()) == {3}
    assert producers.may_resume()
