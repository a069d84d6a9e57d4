"""The publisher's commit rule over fake clients: positions pass only acknowledged prices."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, TopicPartition

from pricing_ha.config import AppConfig
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.quote_worker import MESSAGE_TIMEOUT_MS, PublisherStats, QuoteWorker
from pricing_ha.publishing.quotes import Quote, encode_quote
from pricing_ha.telemetry import Telemetry

CFG = AppConfig()
QUOTES = CFG.topics.quotes


class FakeProducer:
    """Queues records; ``flush`` acknowledges, fails or leaves them pending as scripted."""

    def __init__(self) -> None:
        """Acknowledge everything unless told otherwise."""
        self.pending: list[Callable[..., None]] = []
        self.produced: list[dict[str, Any]] = []
        # "ack" | "fail" | "stuck" | "timeout"; "held": only flush and release() answer
        self.outcome = "ack"

    def produce(self, topic: str, **kwargs: Any) -> None:
        """Queue one record and remember its delivery callback."""
        self.produced.append({"topic": topic, **kwargs})
        self.pending.append(kwargs["on_delivery"])

    def flush(self, timeout: float = -1) -> int:
        """Run the callbacks as scripted; return how many records are still queued."""
        if self.outcome == "stuck":
            return len(self.pending)
        callbacks, self.pending = self.pending, []
        code = {"fail": KafkaError.MSG_SIZE_TOO_LARGE, "timeout": KafkaError._MSG_TIMED_OUT}
        for callback in callbacks:
            callback(KafkaError(code[self.outcome]) if self.outcome in code else None, None)
        return 0

    def poll(self, timeout: float = 0) -> int:
        """Like ``flush``: the broker answers at once (unless stuck or held)."""
        if self.outcome == "held":
            return 0
        self.flush(timeout)
        return 0

    def release(self, n: int, err: KafkaError | None = None) -> None:
        """Acknowledge (or fail) the ``n`` oldest queued records."""
        callbacks, self.pending = self.pending[:n], self.pending[n:]
        for callback in callbacks:
            callback(err, None)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail every queued record as purged."""
        callbacks, self.pending = self.pending, []
        for callback in callbacks:
            callback(KafkaError(KafkaError._PURGE_QUEUE), None)


class FakeConsumer:
    """Records commits and seeks."""

    def __init__(self) -> None:
        """Nothing committed yet."""
        self.commits: list[TopicPartition] = []
        self.seeks: list[TopicPartition] = []

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        """Remember the committed positions."""
        self.commits.extend(offsets)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        """Nothing committed before: every partition without a committed offset."""
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Accept the assignment."""

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Accept the unassignment."""

    def seek(self, tp: TopicPartition) -> None:
        """Remember the seek."""
        self.seeks.append(tp)

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def worker() -> Iterator[QuoteWorker]:
    """A publisher worker leading partition 0, its Kafka clients replaced by fakes."""
    w = QuoteWorker(
        CFG, "p1", "a", lambda _p: True, PublisherStats(), telemetry=Telemetry.noop("test")
    )
    real_consumer = w.consumer
    w.consumer = FakeConsumer()  # type: ignore[assignment]
    made: list[FakeProducer] = []

    def factory(_config: object) -> FakeProducer:
        made.append(FakeProducer())
        return made[-1]

    w.producer = ReplaceableProducer(
        {"enable.idempotence": True}, name="test", logger=logging.getLogger("test"), factory=factory
    )
    w.assign(0)
    w.active.add(0)
    w.note_read([quote(0, 0)])  # its first record was read (the worker loop notes that)
    yield w
    real_consumer.close()


def quote(seq: int, offset: int) -> Message:
    """A valid quote for EURUSD at ``offset`` of partition 0."""
    q = Quote(instrument="EURUSD", seq=seq, bid=1.1, ask=1.2, source_time_ns=1)
    return Message(topic=QUOTES, partition=0, offset=offset, key=b"EURUSD", value=encode_quote(q))


def test_acknowledged_prices_commit_past_their_quotes(worker: QuoteWorker) -> None:
    """When every price is acknowledged, the position moves past the batch's last quote."""
    worker.process([quote(1, 10), quote(2, 11), quote(3, 12)])
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 13)]
    assert consumer.seeks == []


def test_failed_prices_are_replayed_from_the_first_failed_quote(worker: QuoteWorker) -> None:
    """A failed delivery commits no further than the first failed quote and seeks back to it."""
    producer: FakeProducer = worker.producer.producer  # type: ignore[assignment]
    producer.outcome = "fail"
    worker.process([quote(1, 10), quote(2, 11)])
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 10)]
    assert [(tp.partition, tp.offset) for tp in consumer.seeks] == [(0, 10)]


def test_unacknowledged_prices_are_never_committed(worker: QuoteWorker) -> None:
    """Prices still queued keep the position where it was, even when the flush gives up."""
    producer: FakeProducer = worker.producer.producer  # type: ignore[assignment]
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    worker.process([quote(1, 10), quote(2, 11)])  # acknowledged: committed to 12
    producer.outcome = "stuck"
    worker.process([quote(3, 12), quote(4, 13)])
    worker.idle()
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 12)]
    worker.unassign(0)  # waits for the output (the flush gives up), commits nothing more
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 12)]
    assert consumer.seeks == []
    assert (worker.stats.flush_timeouts, worker.stats.delivery_failures) == (1, 0)


def test_positions_pass_only_shares_acknowledged_in_order(worker: QuoteWorker) -> None:
    """Batches are not waited for; a later batch's acknowledgement waits for earlier ones."""
    producer: FakeProducer = worker.producer.producer  # type: ignore[assignment]
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    producer.outcome = "held"
    worker.process([quote(1, 10), quote(2, 11)])
    worker.process([quote(3, 12)])
    assert consumer.commits == []  # nothing acknowledged yet
    producer.pending[2](None, None)  # the second batch's price first (another topic's order)
    worker.idle()
    assert consumer.commits == []
    producer.release(1)
    worker.idle()
    assert consumer.commits == []  # the first batch is half acknowledged
    producer.release(1)
    worker.idle()
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 13)]


def test_a_failure_after_later_acknowledgements_replays_from_the_failed_batch(
    worker: QuoteWorker,
) -> None:
    """A failed record replays its batch and every later one, whatever was acknowledged."""
    producer: FakeProducer = worker.producer.producer  # type: ignore[assignment]
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    producer.outcome = "held"
    worker.process([quote(1, 10)])
    worker.process([quote(2, 11)])
    worker.process([quote(3, 12)])
    producer.release(1)  # the first batch: committed to 11
    producer.release(1, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    producer.release(1)
    worker.idle()
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 11)]
    assert [(tp.partition, tp.offset) for tp in consumer.seeks] == [(0, 11)]
    assert worker.stats.delivery_failures == 1


def test_a_full_local_queue_waits_for_acknowledgements(worker: QuoteWorker) -> None:
    """BufferError from the producer is back-pressure: serve callbacks, then queue again."""
    producer: FakeProducer = worker.producer.producer  # type: ignore[assignment]
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    real = producer.produce
    full = [True]

    def produce(topic: str, **kwargs: Any) -> None:
        if full[0]:
            full[0] = False
            raise BufferError("queue full")
        real(topic, **kwargs)

    producer.produce = produce  # type: ignore[method-assign]
    worker.process([quote(1, 10)])
    assert len(producer.produced) == 1
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 11)]


def test_records_expire_before_the_flush_gives_up() -> None:
    """librdkafka's delivery deadline is shorter than the flush, so callbacks run in time."""
    from pricing_ha.member.worker import FLUSH_TIMEOUT_S

    assert MESSAGE_TIMEOUT_MS < FLUSH_TIMEOUT_S * 1000


def test_a_wedged_producer_is_replaced_and_its_batch_replayed(worker: QuoteWorker) -> None:
    """Timed-out prices replace the producer, replay from the batch, and mark output unready."""
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    first: FakeProducer = worker.producer.producer  # type: ignore[assignment]
    worker.process([quote(1, 10)])  # acknowledged: committed to 11
    first.outcome = "timeout"
    worker.process([quote(2, 11), quote(3, 12)])
    assert worker.producer.producer is not first
    assert worker.stats.producer_replacements == 1
    assert [(tp.partition, tp.offset) for tp in consumer.commits] == [(0, 11), (0, 11)]
    assert [(tp.partition, tp.offset) for tp in consumer.seeks] == [(0, 11)]
    assert worker.output_problem() is not None
    worker.process([quote(2, 11), quote(3, 12)])  # the replay, through the new producer
    assert worker.output_problem() is None
    assert [(tp.partition, tp.offset) for tp in consumer.commits][-1] == (0, 13)


def test_replays_after_permanent_errors_back_off(worker: QuoteWorker) -> None:
    """A price the broker refuses for good is replayed at once the first time, then only after
    a growing wait: the partition does not spin on it (quotes read meanwhile are skipped)."""
    producer: FakeProducer = worker.producer.producer  # type: ignore[assignment]
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    producer.outcome = "fail"  # MSG_SIZE_TOO_LARGE: a replay meets it again
    worker.process([quote(1, 10)])
    assert [tp.offset for tp in consumer.seeks] == [10]  # the first replay: at once
    worker.process([quote(1, 10)])  # the replay fails the same way
    assert [tp.offset for tp in consumer.seeks] == [10]  # not at once this time
    produced = len(producer.produced)
    worker.process([quote(1, 10), quote(2, 11)])  # read while the replay waits: skipped
    assert len(producer.produced) == produced

    def replayed() -> bool:
        worker.idle()
        return len(consumer.seeks) == 2

    wait_for(replayed, 2.0, "the held replay", interval_s=0.02)
    assert [tp.offset for tp in consumer.seeks] == [10, 10]
    assert {tp.offset for tp in consumer.commits} == {10}


def test_replays_after_timeouts_stay_immediate(worker: QuoteWorker) -> None:
    """Timed-out prices (a paused broker, a replaced producer) are replayed at once every time:
    a fail-over's gap depends on it."""
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    for _ in range(3):
        producer: FakeProducer = worker.producer.producer  # type: ignore[assignment]
        producer.outcome = "timeout"
        worker.process([quote(1, 10)])
    assert [tp.offset for tp in consumer.seeks] == [10, 10, 10]
