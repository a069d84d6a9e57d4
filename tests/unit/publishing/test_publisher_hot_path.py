"""The publisher's per-quote work: the bytes and headers it produces, its counters, and how
often it asks NELI whether it leads."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition

from pricing_ha.config import AppConfig
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.publishing.pricing import ParamsBook, encode_price, price_quote
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.publishing.quotes import Quote, encode_quote
from pricing_ha.telemetry import Telemetry

CFG = AppConfig()


class _Producer:
    """Remembers records; acknowledges them at the next poll; full ``full`` times first."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.full = 0
        self.polls = 0

    def produce(self, topic: str, **kwargs: Any) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.records.append({"topic": topic, **kwargs})

    def poll(self, _timeout: float = 0) -> int:
        self.polls += 1
        for record in self.records:
            if not record.get("acked"):
                record["acked"] = True
                record["on_delivery"](None, None)
        return 0

    def flush(self, timeout: float = 0) -> int:
        self.poll(timeout)
        return 0

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self.records.clear()


class _Consumer:
    def __init__(self) -> None:
        self.commits: list[TopicPartition] = []

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        pass

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        pass

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        self.commits.extend(offsets)

    def close(self) -> None:
        pass


class _Leads:
    """NELI's answer, scripted; counts the questions per partition."""

    def __init__(self) -> None:
        self.asked: dict[int, int] = {}
        self.led = {0, 1}

    def __call__(self, partition: int) -> bool:
        self.asked[partition] = self.asked.get(partition, 0) + 1
        return partition in self.led


@pytest.fixture
def leads() -> _Leads:
    """Partitions 0 and 1 led."""
    return _Leads()


@pytest.fixture
def worker(leads: _Leads) -> QuoteWorker:
    """A publisher p1/a leading partitions 0 and 1 over fake clients."""
    w = QuoteWorker(CFG, "p1", "a", leads, PublisherStats(), telemetry=Telemetry.noop("test"))
    w.consumer.close()  # never used: no broker here
    w.consumer = _Consumer()  # type: ignore[assignment]
    w.producer = ReplaceableProducer(
        {"enable.idempotence": True},
        name="test",
        logger=logging.getLogger("test"),
        factory=lambda _c: _Producer(),
    )
    for partition in (0, 1):
        w.assign(partition)
        w.active.add(partition)
    w.note_read([_msg("A", 1, 0, 0), _msg("A", 1, 1, 0)])
    return w


def _quote(instrument: str, seq: int) -> Quote:
    return Quote(
        instrument=instrument, seq=seq, bid=1.08501, ask=1.08503, source_time_ns=5, epoch=17
    )


def _msg(instrument: str, seq: int, partition: int, offset: int) -> Message:
    return Message(
        topic=CFG.topics.quotes,
        partition=partition,
        offset=offset,
        key=instrument.encode(),
        value=encode_quote(_quote(instrument, seq)),
    )


def _records(w: QuoteWorker) -> list[dict[str, Any]]:
    producer: _Producer = w.producer.producer  # type: ignore[assignment]
    return producer.records


def test_a_price_record_has_the_canonical_bytes_and_headers(worker: QuoteWorker) -> None:
    """Key, value, partition and headers of a price are exactly the contract's."""
    worker.process([_msg("EURUSD", 7, 1, 40)])
    (record,) = _records(worker)
    expected = encode_price(
        price_quote(_quote("EURUSD", 7), ParamsBook.from_config(CFG.pricing).defaults)
    )
    assert (record["topic"], record["key"], record["value"], record["partition"]) == (
        CFG.topics.raw,
        b"EURUSD",
        expected,
        1,
    )
    names = [name for name, _ in record["headers"]]
    assert names == ["seq", "group", "member", "publish_ns"]
    values = dict(record["headers"])
    assert (values["seq"], values["group"], values["member"]) == (b"7", b"p1", b"a")
    assert values["publish_ns"].isdigit()


def test_counters_count_priced_and_dead_lettered_quotes(worker: QuoteWorker) -> None:
    """priced and per_partition count produced prices only; a bad quote is dead-lettered."""
    sent: list[int] = []

    def send(**kw: Any) -> None:
        sent.append(kw["offset"])
        kw["on_settled"]()

    worker.dead_letters.send = send  # type: ignore[method-assign]
    bad = Message(topic=CFG.topics.quotes, partition=0, offset=3, key=b"X", value=b"{")
    worker.process([_msg("A", 1, 0, 1), _msg("A", 2, 0, 2), bad, _msg("B", 1, 1, 9)])
    assert (worker.stats.priced, worker.stats.dead_lettered) == (3, 1)
    assert worker.stats.per_partition == {0: 2, 1: 1}
    assert sent == [3]
    consumer: _Consumer = worker.consumer  # type: ignore[assignment]
    assert sorted((tp.partition, tp.offset) for tp in consumer.commits) == [(0, 4), (1, 10)]


def test_leadership_is_asked_once_per_partition_per_batch(
    worker: QuoteWorker, leads: _Leads
) -> None:
    """A batch asks NELI once for each partition it has quotes of, before the first."""
    leads.asked.clear()
    worker.process([_msg("A", s, s % 2, s) for s in range(1, 21)])
    assert leads.asked == {0: 1, 1: 1}
    assert worker.stats.priced == 20
    worker.process([_msg("A", 21, 0, 21)])
    assert leads.asked == {0: 2, 1: 1}


def test_a_partition_not_led_produces_nothing_and_is_dropped(
    worker: QuoteWorker, leads: _Leads
) -> None:
    """A partition NELI no longer gives this member is skipped for the batch and dropped."""
    leads.led = {1}
    worker.process([_msg("A", 1, 0, 5), _msg("B", 1, 1, 6), _msg("A", 2, 0, 7)])
    assert [r["partition"] for r in _records(worker)] == [1]
    assert worker.stats.not_leader_skips == 1
    assert 0 not in worker.active


def test_a_wait_for_queue_room_asks_for_leadership_again(
    worker: QuoteWorker, leads: _Leads
) -> None:
    """After waiting for room in a full producer queue, the next quote asks NELI again."""
    producer: _Producer = worker.producer.producer  # type: ignore[assignment]
    leads.asked.clear()
    producer.full = 1
    worker.process([_msg("A", 1, 0, 1), _msg("A", 2, 0, 2), _msg("A", 3, 0, 3)])
    assert leads.asked == {0: 2}
    assert [r["value"] for r in _records(worker)] == [
        encode_price(ParamsBook.from_config(CFG.pricing).price(_quote("A", s))) for s in (1, 2, 3)
    ]
