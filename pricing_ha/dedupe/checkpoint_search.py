"""Where a standby tail starts: the latest checkpoint near each partition's end of ``prices``.

A view is a fold of the partition's records: the state after reading ``[0, position)`` is the
same whoever read it. So a member that opens its tail (:mod:`.standby`; a relay joining or
restarting) does not read ``prices`` from its start: :func:`latest_checkpoints` looks for the
latest checkpoint near each partition's end, and the tail takes the view it carries and reads
on from that view's ``position``. The start-up read is the records since the latest checkpoint
(about a second of prices), whatever the topic holds. The search reads back from the reported
end in growing windows; a partition without a checkpoint in its last :data:`_SEARCH_MAX`
records (a topic written before checkpoints, or a query that failed) is read from its start,
which is slower, never wrong. A checkpoint appended after the end was asked for is not found:
the search then finds an earlier one, which is as valid.

Checkpoint records and the :class:`~.control.PartitionView` they carry are described in
:mod:`.control`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaException, Message, TopicPartition

from pricing_ha.dedupe.control import CHECKPOINT, PartitionView, control_of
from pricing_ha.kafka.ranges import read_ranges

__all__ = ["Reader", "latest_checkpoints"]

log = logging.getLogger("pricing_ha.relay")

# Records read back from the end to find the latest checkpoint (one per partition about every
# second: 512 is 4 s of prices at 125 per partition per second) ...
_SEARCH_FIRST = 512
_SEARCH_MAX = 131_072  # ... growing fourfold up to this many, then read from the start
_SEARCH_TIMEOUT_S = 10.0  # one window's read
_SEARCH_FETCH_BYTES = 1 << 20
_END_QUERY_TIMEOUT_S = 5.0


class Reader(Protocol):
    """What the standby tail and its checkpoint search read ``prices`` with (a consumer)."""

    def assign(self, partitions: list[TopicPartition]) -> None: ...
    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...
    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float
    ) -> tuple[int, int] | None: ...
    def close(self) -> None: ...


def latest_checkpoints(
    make: Callable[[dict[str, Any]], Reader],
    settings: dict[str, Any],
    topic: str,
    partitions: int,
    *,
    stop: threading.Event,
    counted: Callable[[], None],
) -> dict[int, PartitionView]:
    """Find each partition's latest checkpoint; return the view it carries, by partition.

    Partitions without one (in the last :data:`_SEARCH_MAX` records, or whose end is unknown)
    are left out. The search reads through its own consumer, built by ``make`` from the tail's
    ``settings``; ``counted`` is called for every record it reads, and ``stop`` cuts it short.
    """
    # Up to 1 MiB per fetch response, not the tail's 64 KiB: with the tail's setting the
    # search took dozens of fetches, 5-9 s for a joining relay in the fault drill.
    reader = make(
        {
            **settings,
            "client.id": "relay-standby-search",
            "fetch.max.bytes": _SEARCH_FETCH_BYTES,
            "max.partition.fetch.bytes": _SEARCH_FETCH_BYTES,
        }
    )
    try:
        ranges: dict[int, tuple[int, int, int]] = {}  # p -> (low, window start, end)
        for p in range(partitions):
            try:
                got = reader.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=_END_QUERY_TIMEOUT_S
                )
            except KafkaException as exc:
                log.info("partition %d's end is unknown (%s): read from its start", p, exc)
                continue
            if got is not None and got[1] > got[0]:
                low, high = got
                ranges[p] = (low, max(low, high - _SEARCH_FIRST), high)
        found: dict[int, PartitionView] = {}
        window = _SEARCH_FIRST
        while ranges and not stop.is_set():
            found |= _search(reader, topic, {p: r[1:] for p, r in ranges.items()}, stop, counted)
            window *= 4
            if window > _SEARCH_MAX:
                break
            ranges = {
                p: (low, max(low, start - window), start)
                for p, (low, start, _) in ranges.items()
                if p not in found and start > low
            }
    finally:
        reader.close()
    return found


def _search(
    reader: Reader,
    topic: str,
    ranges: dict[int, tuple[int, int]],
    stop: threading.Event,
    counted: Callable[[], None],
) -> dict[int, PartitionView]:
    """The latest checkpoint in ``[start, end)`` of each partition in ``ranges``."""
    found: dict[int, PartitionView] = {}
    for msg in read_ranges(reader, topic, ranges, _SEARCH_TIMEOUT_S, should_stop=stop.is_set):
        counted()
        control = control_of(msg)
        if control is not None and control[0] == CHECKPOINT:
            view = PartitionView.decode(msg.value() or b"", msg.offset() or 0)
            if view is not None:
                found[msg.partition() or 0] = view
    return found
