"""Offset ranges of Kafka partitions, and reading one range: the Spark-free half of the reader.

The end of a partition is learned by reading, not by asking: the embedded broker answers
ListOffsets(LATEST) with an offset that can lag the data (after a multi-record batch it reports
where the batch starts), while the high watermark in a fetch response is right. So
:func:`end_offsets` starts a consumer a little before the reported end, reads what is there and
takes, per partition, the larger of the fetch high watermark and the offset after the last
record read. On a real Kafka both answers agree and the tail read costs one fetch.

Offsets travel as JSON-able dicts ``{topic: {"partition": offset}}``, the layout of the built-in
connector's ``startingOffsets``/``endingOffsets`` options.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

__all__ = [
    "KafkaRange",
    "Offsets",
    "ReadTimeoutError",
    "consumer_settings",
    "end_offsets",
    "plan_ranges",
    "read_range",
    "start_offsets",
]

#: ``{topic: {"partition": offset}}``, JSON-compatible (keys are strings, as in the connector).
Offsets = dict[str, dict[str, int]]

_BATCH = 1000
_POLL_S = 0.2


class ReadTimeoutError(RuntimeError):
    """A partition did not yield the records up to its planned end within the time allowed.

    Attributes:
        topic: the topic.
        partition: the partition.
        reached: the next offset that would have been read.
        end: the planned end (exclusive).
    """

    def __init__(self, topic: str, partition: int, reached: int, end: int) -> None:
        self.topic, self.partition, self.reached, self.end = topic, partition, reached, end
        super().__init__(f"{topic}[{partition}]: read to offset {reached}, not to {end}")


@dataclass(frozen=True, slots=True)
class KafkaRange:
    """Offsets ``[start, end)`` of one partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int


def consumer_settings(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A manual-assign consumer's settings: a throwaway group id, never committing."""
    return {
        "log.connection.close": False,
        "fetch.wait.max.ms": 50,
        "socket.timeout.ms": 10_000,
        **(extra or {}),
        "bootstrap.servers": bootstrap,
        "group.id": f"pricing-ha-pipeline-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }


def _partitions(consumer: Consumer, topic: str, timeout_s: float) -> list[int]:
    meta = consumer.list_topics(topic, timeout=timeout_s)
    info = meta.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        raise KafkaException(f"topic {topic!r} not found ({info.error if info else 'no metadata'})")
    return sorted(info.partitions)


def start_offsets(
    settings: Mapping[str, str | int | float | bool], topics: list[str], timeout_s: float = 10.0
) -> Offsets:
    """The earliest offset of every partition of ``topics`` (the low watermarks)."""
    consumer = Consumer(dict(settings))
    try:
        out: Offsets = {}
        for topic in topics:
            out[topic] = {}
            for p in _partitions(consumer, topic, timeout_s):
                low, _ = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=timeout_s, cached=False
                )
                out[topic][str(p)] = max(0, low)
        return out
    finally:
        consumer.close()


def end_offsets(
    settings: Mapping[str, str | int | float | bool],
    topics: list[str],
    *,
    timeout_s: float = 30.0,
) -> Offsets:
    """The end (next offset to be written) of every partition of ``topics``, learned by reading.

    Fetches from one record before the broker's reported end until every partition has
    answered a fetch: the end is the larger of that answer's high watermark and the offset after
    the last record the fetch returned.

    Raises:
        KafkaException: a topic is missing, or a partition did not answer within ``timeout_s``.
    """
    consumer = Consumer(dict(settings))
    try:
        assign: list[TopicPartition] = []
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            for p in _partitions(consumer, topic, timeout_s):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=timeout_s, cached=False
                )
                ends[(topic, p)] = max(low, high, 0)
                assign.append(TopicPartition(topic, p, max(low, high - 1, 0)))
        consumer.assign(assign)
        deadline = time.monotonic() + timeout_s
        answered: set[tuple[str, int]] = set()
        while time.monotonic() < deadline:
            batch = consumer.consume(_BATCH, _POLL_S)
            for msg in batch:
                offset, partition, name = msg.offset(), msg.partition(), msg.topic()
                if msg.error() is None and offset is not None and partition is not None and name:
                    key = (name, partition)
                    ends[key] = max(ends[key], offset + 1)
            for tp in assign:
                key = (tp.topic, tp.partition)
                _, fetched_high = consumer.get_watermark_offsets(tp, cached=True)
                if fetched_high >= 0:
                    answered.add(key)
                    ends[key] = max(ends[key], fetched_high)
            if len(answered) == len(assign):
                break
        else:
            missing = sorted({(tp.topic, tp.partition) for tp in assign} - answered)
            raise KafkaException(f"no fetch answer within {timeout_s:.0f} s from {missing}")
        out: Offsets = {}
        for (topic, p), end in sorted(ends.items()):
            out.setdefault(topic, {})[str(p)] = end
        return out
    finally:
        consumer.close()


def plan_ranges(start: Offsets, end: Offsets) -> list[KafkaRange]:
    """One non-empty range per partition present in ``end`` (a partition new since ``start``
    starts at 0)."""
    out = []
    for topic, parts in sorted(end.items()):
        for p, stop in sorted(parts.items(), key=lambda kv: int(kv[0])):
            begin = start.get(topic, {}).get(p, 0)
            if stop > begin:
                out.append(KafkaRange(topic, int(p), begin, stop))
    return out


def read_range(
    settings: Mapping[str, str | int | float | bool], r: KafkaRange, timeout_s: float = 120.0
) -> Iterator[list[Message]]:
    """The records of ``r`` in offset order, in batches; every offset below ``r.end`` that holds
    a record is read exactly once.

    Raises:
        ReadTimeoutError: the range could not be read within ``timeout_s`` (broker gone, or the
            records were deleted by retention meanwhile).
    """
    consumer = Consumer(dict(settings))
    tp = TopicPartition(r.topic, r.partition, r.start)
    try:
        consumer.assign([tp])
        next_offset = r.start
        deadline = time.monotonic() + timeout_s
        while next_offset < r.end:
            if time.monotonic() > deadline:
                raise ReadTimeoutError(r.topic, r.partition, next_offset, r.end)
            batch = consumer.consume(_BATCH, _POLL_S)
            out = []
            for msg in batch:
                offset = msg.offset()
                if msg.error() is not None or offset is None or offset < next_offset:
                    continue
                if offset < r.end:
                    out.append(msg)
                next_offset = offset + 1
            if out:
                yield out
            if not batch:
                # Gaps (transaction markers, compaction) leave offsets without records: the
                # consumer's position says when the range has been passed.
                (pos,) = consumer.position([tp])
                next_offset = max(next_offset, pos.offset)
    finally:
        consumer.close()
