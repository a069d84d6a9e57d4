"""Dead letters: bounded records, and a fate for every failure of the dead-letter topic.

The publisher case is the drill's: a 600 KB invalid quote made a dead letter twice its size
(the reason repeated the field), the produce raised MSG_SIZE_TOO_LARGE and both publishing
groups crash-looped on the partition.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from pricing_ha.config import AppConfig
from pricing_ha.kafka import dead_letter
from pricing_ha.kafka.dead_letter import (
    KEY_CAP_BYTES,
    MAX_ATTEMPTS,
    MAX_REASON_BYTES,
    PAYLOAD_CAP_BYTES,
    DeadLetters,
    build_dead_letter,
)
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.telemetry import Telemetry
from tests.unit.publishing.test_publisher_commits import FakeConsumer, quote

CFG = AppConfig()
LIBRDKAFKA_MESSAGE_MAX_BYTES = 1_000_000  # librdkafka's default message.max.bytes


def size_of(record: dict[str, Any]) -> int:
    """Bytes of a record's key, value and headers (what message.max.bytes bounds)."""
    headers = record.get("headers") or []
    return (
        len(record.get("key") or b"")
        + len(record.get("value") or b"")
        + sum(len(k) + len(v or b"") for k, v in headers)
    )


class SizedProducer:
    """A producer that refuses records over ``local_max`` at produce time (as librdkafka
    does) and fails deliveries as the test scripts them (``broker``: a callable per record)."""

    def __init__(self, local_max: int = LIBRDKAFKA_MESSAGE_MAX_BYTES) -> None:
        """Nothing produced yet; every record delivered."""
        self.local_max = local_max
        self.produced: list[dict[str, Any]] = []
        self.pending: list[tuple[Callable[..., None], dict[str, Any]]] = []
        self.broker: Callable[[dict[str, Any]], KafkaError | None] = lambda _r: None

    def produce(self, topic: str, **kwargs: Any) -> None:
        """Queue one record, or raise as librdkafka does for one over message.max.bytes."""
        record = {"topic": topic, **kwargs}
        if size_of(record) > self.local_max:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        self.produced.append(record)
        self.pending.append((kwargs["on_delivery"], record))

    def poll(self, timeout: float = 0) -> int:
        """Settle everything queued, as ``broker`` says."""
        pending, self.pending = self.pending, []
        for callback, record in pending:
            callback(self.broker(record), None)
        return len(pending)

    def flush(self, timeout: float = -1) -> int:
        """Like poll; nothing stays queued."""
        self.poll()
        return 0

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Nothing to purge here."""


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        """Start at 0."""
        self.now = 0.0

    def __call__(self) -> float:
        """The current time."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Sleeping moves the clock on."""
        self.now += seconds


def letters(
    producer: SizedProducer, clock: Clock | None = None, logger: str = "test.dlq"
) -> DeadLetters:
    """A DeadLetters over ``producer``."""
    clock = clock or Clock()
    return DeadLetters(
        {},
        topic="md.quotes.dlq",
        source_topic="md.quotes",
        identity=[("member", b"a")],
        logger=logging.getLogger(logger),
        factory=lambda _c: producer,
        clock=clock,
        sleep=clock.sleep,
    )


def header(record: dict[str, Any], name: str) -> bytes:
    """One header of a produced record."""
    value: bytes = next(v for k, v in record["headers"] if k == name)
    return value


def test_a_huge_record_makes_a_bounded_dead_letter() -> None:
    """A 600 KB value, a 2 KB key and a 600 KB reason give a dead letter under 70 KB."""
    letter = build_dead_letter(
        reason="field 'bid' must be a number, got " + "x" * 600_000,
        source_topic="md.quotes",
        source_partition=3,
        source_offset=17,
        key=b"k" * 2048,
        value=b"v" * 600_000,
    )
    headers = dict(letter.headers)
    assert len(headers["reason"] or b"") <= MAX_REASON_BYTES
    assert letter.value is not None
    assert len(letter.value) == PAYLOAD_CAP_BYTES
    assert letter.key is not None
    assert len(letter.key) == KEY_CAP_BYTES
    assert headers["original.value.size"] == b"600000"
    assert headers["original.key.size"] == b"2048"
    assert headers["truncated"] == b"true"
    assert (headers["source.partition"], headers["source.offset"]) == (b"3", b"17")


def test_a_size_refusal_is_sent_again_smaller() -> None:
    """A DLQ topic refusing 4 KB records still gets the dead letter, with less payload."""
    producer = SizedProducer()
    producer.broker = lambda r: (
        KafkaError(KafkaError.MSG_SIZE_TOO_LARGE) if size_of(r) > 4000 else None
    )
    settled: list[int] = []
    dlq = letters(producer)
    dlq.send(
        partition=0,
        offset=5,
        key=b"K",
        value=b"v" * 100_000,
        reason="bad",
        on_settled=lambda: settled.append(5),
    )
    assert dlq.floor(0) == 5
    for _ in range(4):
        dlq.poll()
    assert settled == [5]
    assert dlq.floor(0) is None
    delivered = producer.produced[-1]
    assert size_of(delivered) <= 4000
    assert header(delivered, "original.value.size") == b"100000"
    assert (dlq.stats.delivered, dlq.stats.shrunk, dlq.stats.lost) == (1, 2, 0)


def test_retriable_failures_back_off_then_give_up_and_settle() -> None:
    """A DLQ that always times out is tried MAX_ATTEMPTS times with growing waits, then given
    up: the record is settled all the same, and counted lost."""
    producer = SizedProducer()
    producer.broker = lambda _r: KafkaError(KafkaError._MSG_TIMED_OUT)
    clock = Clock()
    settled: list[int] = []
    dlq = letters(producer, clock)
    dlq.send(
        partition=1,
        offset=9,
        key=None,
        value=b"x",
        reason="bad",
        on_settled=lambda: settled.append(9),
    )
    dlq.poll()  # the first attempt fails; the next is due after a backoff, not at once
    assert len(producer.produced) == 1
    dlq.poll()
    assert len(producer.produced) == 1
    assert dlq.flush(60.0) == 0
    assert len(producer.produced) == MAX_ATTEMPTS
    assert clock.now >= 0.1 + 0.2 + 0.4 + 0.8
    assert settled == [9]
    assert (dlq.stats.retried, dlq.stats.lost) == (MAX_ATTEMPTS - 1, 1)


def test_permanent_failures_settle_at_once_with_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not authorized: each dead letter is given up at once (the input moves on), and a
    hundred of them log one line."""
    producer = SizedProducer()
    producer.broker = lambda _r: KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    settled: list[int] = []
    dlq = letters(producer, logger="test.dlq.permanent")
    with caplog.at_level(logging.ERROR, logger="test.dlq.permanent"):
        for offset in range(100):
            dlq.send(
                partition=0,
                offset=offset,
                key=b"K",
                value=b"v",
                reason="bad",
                on_settled=functools.partial(settled.append, offset),
            )
        dlq.poll()
    assert settled == list(range(100))
    assert (dlq.stats.lost, dlq.outstanding) == (100, 0)
    assert len(caplog.records) == 1


def test_a_produce_call_that_raises_is_a_failure_not_an_exception() -> None:
    """librdkafka refusing a record at produce time is handled like a failed delivery."""
    producer = SizedProducer(local_max=550)  # the headers fit, 256 bytes of payload do not
    settled: list[int] = []
    dlq = letters(producer)
    dlq.send(
        partition=0,
        offset=1,
        key=b"K",
        value=b"v" * 1000,
        reason="r" * 1000,
        on_settled=lambda: settled.append(1),
    )
    dlq.flush(1.0)
    # 64 KiB, 4 KiB and 256 B are refused locally; no payload at all fits.
    assert settled == [1]
    assert producer.produced[-1]["value"] == b""
    assert header(producer.produced[-1], "truncated") == b"true"


# -- the publisher --------------------------------------------------------------------------


@pytest.fixture
def publisher(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[QuoteWorker, SizedProducer]]:
    """A publisher leading partition 0; its producers (prices, dead letters) are one fake that
    refuses records over librdkafka's default message.max.bytes."""
    fake = SizedProducer()
    monkeypatch.setattr(dead_letter, "Producer", lambda _c, logger=None: fake)
    w = QuoteWorker(
        CFG, "p1", "a", lambda _p: True, PublisherStats(), telemetry=Telemetry.noop("test")
    )
    real_consumer = w.consumer
    w.consumer = FakeConsumer()  # type: ignore[assignment]
    w.producer = ReplaceableProducer(
        {"enable.idempotence": True},
        name="test",
        logger=logging.getLogger("test"),
        factory=lambda _c: fake,
    )
    w.assign(0)
    w.active.add(0)
    w.note_read([quote(0, 0)])
    yield w, fake
    real_consumer.close()


def huge_invalid_quote(offset: int) -> Message:
    """A 600 KB quote whose invalid field the reason quotes."""
    value = orjson.dumps(
        {"instrument": "EURUSD", "seq": 2, "bid": "x" * 600_000, "ask": 1.2, "source_time_ns": 1}
    )
    return Message(topic=CFG.topics.quotes, partition=0, offset=offset, key=b"EURUSD", value=value)


def test_a_600kb_invalid_quote_is_dead_lettered_and_prices_go_on(
    publisher: tuple[QuoteWorker, SizedProducer],
) -> None:
    """The 600 KB quote lands bounded on the DLQ; the quotes around it are priced and the
    position moves past all three."""
    worker, fake = publisher
    worker.process([quote(1, 10), huge_invalid_quote(11), quote(3, 12)])
    worker.idle()
    dlq = [r for r in fake.produced if r["topic"] == CFG.topics.dlq]
    prices = [r for r in fake.produced if r["topic"] == CFG.topics.raw]
    assert len(prices) == 2
    assert len(dlq) == 1
    assert len(header(dlq[0], "reason")) <= MAX_REASON_BYTES
    assert size_of(dlq[0]) < PAYLOAD_CAP_BYTES + 2048
    assert header(dlq[0], "source.offset") == b"11"
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    assert [(tp.partition, tp.offset) for tp in consumer.commits][-1] == (0, 13)
    assert worker.stats.dead_lettered == 1


def test_a_dead_letter_topic_that_refuses_everything_does_not_hold_the_partition(
    publisher: tuple[QuoteWorker, SizedProducer],
) -> None:
    """Dead letters refused for good are given up: prices are neither failed nor replayed,
    and the position moves past the invalid quote."""
    worker, fake = publisher
    fake.broker = lambda r: (
        KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED) if r["topic"] == CFG.topics.dlq else None
    )
    worker.process([quote(1, 10), huge_invalid_quote(11), quote(3, 12)])
    worker.idle()
    consumer: FakeConsumer = worker.consumer  # type: ignore[assignment]
    assert [(tp.partition, tp.offset) for tp in consumer.commits][-1] == (0, 13)
    assert consumer.seeks == []
    assert worker.stats.delivery_failures == 0
    assert worker.dead_letters.stats.lost == 1
