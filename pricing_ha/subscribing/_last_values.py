"""The last price of each instrument on connect, read back from the end of each partition.

``prices`` is not compacted and the relay keeps no per-instrument offsets, but the relay
writes a *checkpoint* on each partition about every second (:mod:`pricing_ha.dedupe.control`)
whose view names every instrument with a mark there. So the latest record of each instrument
below the end is found by reading back from the end in growing windows until the window holds
a price of every instrument wanted: the client's filter if it has one, else every instrument
named by the newest checkpoint in the window (instruments priced after that checkpoint are in
the window anyway). An instrument that stopped pricing long ago costs a longer read-back,
bounded by ``max_records`` per partition and by the partition's start. Nothing is added to the
relay's hot path: the cost is the reader's, typically about a second of prices per partition.

Runs on the client's consumer thread (blocking librdkafka calls).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Message, TopicPartition

from pricing_ha.dedupe.control import CHECKPOINT, PartitionView, control_of
from pricing_ha.kafka.ranges import read_ranges

__all__ = ["LastValues", "Reader", "read_last_values"]

_FIRST_WINDOW = 1024  # records read back first (a few seconds of prices per partition)
_BATCH = 500
_POLL_S = 0.2


class Reader(Protocol):
    """The consumer calls the read-back makes (a fake in unit tests)."""

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Assigns partitions at the given offsets."""
        ...

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` records, waiting at most ``timeout`` seconds."""
        ...

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> Any:
        """``(low, high)`` of a partition (``high`` is the last stable offset: read_committed)."""
        ...


@dataclass(slots=True)
class LastValues:
    """What the read-back found.

    Attributes:
        ends: partition -> the offset live reading starts at (the end when asked).
        records: the latest price record of each instrument found, in (partition, offset)
            order.
        complete: partitions where every wanted instrument was found (or the start was reached).
    """

    ends: dict[int, int] = field(default_factory=dict)
    records: list[Message] = field(default_factory=list)
    complete: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Partition:
    low: int
    end: int
    start: int  # the current window's first offset
    wanted: set[bytes] | None  # the instruments wanted here (None: all)
    found: dict[bytes, Message] = field(default_factory=dict)
    named: set[bytes] | None = None  # instruments of the newest checkpoint seen
    newest_checkpoint: int = -1


def read_last_values(
    reader: Reader,
    topic: str,
    partitions: Iterable[int],
    wanted: dict[int, set[bytes]] | None,
    *,
    max_records: int,
    timeout_s: float,
) -> LastValues:
    """Reads back from the end of each partition for the latest price of each instrument.

    Args:
        reader: a read_committed consumer (its assignment is replaced).
        topic: the topic.
        partitions: the partitions to read back.
        wanted: partition -> instrument keys wanted there (``None``: every instrument, as named
            by the relay's checkpoints).
        max_records: the longest read-back per partition.
        timeout_s: the bound of each end query and of each window's read.

    Returns:
        The ends and the records found (see :class:`LastValues`).
    """
    out = LastValues()
    state: dict[int, _Partition] = {}
    for p in partitions:
        low, high = reader.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
        out.ends[p] = high
        if high <= low or (wanted is not None and not wanted.get(p)):
            out.complete.add(p)
            continue
        state[p] = _Partition(
            low, high, max(low, high - _FIRST_WINDOW), None if wanted is None else wanted[p]
        )
    window = _FIRST_WINDOW
    ranges = {p: (s.start, s.end) for p, s in state.items()}
    while ranges:
        _read(reader, topic, ranges, state, timeout_s)
        for p in list(ranges):
            s = state[p]
            need = s.wanted if s.wanted is not None else s.named
            if s.start <= s.low or (need is not None and need <= s.found.keys()):
                out.complete.add(p)
        window *= 4
        if window > max_records:
            break
        ranges = {}
        for p, s in state.items():
            if p not in out.complete:
                first = max(s.low, s.end - window)
                ranges[p] = (first, s.start)
                s.start = first
    out.records = sorted(
        (m for s in state.values() for m in s.found.values()),
        key=lambda m: (m.partition() or 0, m.offset() or 0),
    )
    return out


def _read(
    reader: Reader,
    topic: str,
    ranges: dict[int, tuple[int, int]],
    state: dict[int, _Partition],
    timeout_s: float,
) -> None:
    """Reads ``[first, stop)`` of each partition; keeps, per instrument, the newest price of
    the window unless a later window (read earlier) found one already."""
    newest: dict[int, dict[bytes, Message]] = {p: {} for p in ranges}
    for msg in read_ranges(reader, topic, ranges, timeout_s, batch=_BATCH, poll_s=_POLL_S):
        p, offset = msg.partition() or 0, msg.offset() or 0
        key = msg.key()
        control = control_of(msg)
        if control is None and isinstance(key, bytes):
            wanted = state[p].wanted
            if wanted is None or key in wanted:
                newest[p][key] = msg
        elif control is not None and control[0] == CHECKPOINT:
            s = state[p]
            view = PartitionView.decode(msg.value() or b"", offset)
            if view is not None and offset > s.newest_checkpoint:
                s.newest_checkpoint = offset
                s.named = {k.encode() for k in view.high}
    for p, found in newest.items():
        for key, msg in found.items():
            state[p].found.setdefault(key, msg)
