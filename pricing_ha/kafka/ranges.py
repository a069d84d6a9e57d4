"""Reading a bounded range of offsets from several partitions at once, as a catch-up does.

A reader that looks back from a partition's end (the relay's checkpoint search, a subscriber's
read-back of last values) assigns ``[first, end)`` of each partition and reads until each
range is done: its last offset read, or the partition's end reported (``enable.partition.eof``;
the last offsets of a transactional topic are commit markers no consumer ever sees), or the
time is up. :func:`read_ranges` is that loop, once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Protocol

from confluent_kafka import KafkaError, Message, TopicPartition

__all__ = ["RangeReader", "read_ranges"]


class RangeReader(Protocol):
    """The consumer calls :func:`read_ranges` makes."""

    def assign(self, partitions: list[TopicPartition]) -> None: ...
    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...


def read_ranges(
    reader: RangeReader,
    topic: str,
    ranges: dict[int, tuple[int, int]],
    timeout_s: float,
    *,
    batch: int = 500,
    poll_s: float = 0.2,
    should_stop: Callable[[], bool] = lambda: False,
) -> Iterator[Message]:
    """Yields the records of ``[first, end)`` of each partition in ``ranges``, in offset order
    per partition, until every range is read, ``timeout_s`` has passed or ``should_stop()``.

    Replaces the reader's assignment. Errors other than the end of a partition are skipped (a
    range cut short by one is read as far as it got).
    """
    reader.assign([TopicPartition(topic, p, first) for p, (first, _) in ranges.items()])
    pending = {p for p, (first, end) in ranges.items() if end > first}
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline and not should_stop():
        for msg in reader.consume(batch, poll_s):
            p, offset = msg.partition(), msg.offset()
            if p not in pending or offset is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(p)
                continue
            end = ranges[p][1]
            if offset >= end - 1:
                pending.discard(p)
            if offset < end:
                yield msg
