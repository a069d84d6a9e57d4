"""Where a partition taken up by hand starts: its group's committed offset, asked explicitly.

A partition assigned without an offset (``OFFSET_INVALID``) makes librdkafka fetch the group's
committed offset itself. When that OffsetFetch is answered with a request-level
``NOT_COORDINATOR`` (the group's coordinator moved: a broker restarted or failed over, or the
offsets topic is still loading), librdkafka 2.x leaves the partition waiting for an answer
that never comes: it is never fetched, with no error but one consumer event
(confluentinc/librdkafka#5586). So the workers ask for the committed offsets themselves
(:func:`committed_starts`) and assign at explicit offsets; and a coordinator error seen on the
consumer makes them restart any partition that has not started (:func:`restart_unstarted`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

__all__ = [
    "COORDINATOR_ERRORS",
    "any_unknown",
    "committed_starts",
    "coordinator_trouble",
    "error_code",
    "restart_unstarted",
]

log = logging.getLogger("pricing_ha.kafka")

_RETRY_S = 0.1

#: Errors with which a group coordinator answers while it moves or loads.
COORDINATOR_ERRORS = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)


def error_code(exc: KafkaException) -> int | None:
    """The code of the :class:`KafkaError` ``exc`` carries, or ``None`` if it carries none."""
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else None


class _Consumer(Protocol):
    def committed(
        self, partitions: list[TopicPartition], timeout: float = ...
    ) -> list[TopicPartition]: ...

    def assignment(self) -> list[TopicPartition]: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...

    def incremental_assign(self, partitions: list[TopicPartition]) -> None: ...

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None: ...


def committed_starts(
    consumer: _Consumer, topic: str, partitions: Iterable[int], timeout_s: float
) -> list[TopicPartition]:
    """Each partition at its group's committed offset (the beginning if none was committed).

    A partition whose committed offset could not be learned within ``timeout_s`` comes back
    at ``OFFSET_INVALID`` (librdkafka then asks; :func:`restart_unstarted` covers a lost answer).
    """
    wanted = [TopicPartition(topic, p, OFFSET_INVALID) for p in partitions]
    if not wanted:
        return []
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = consumer.committed(wanted, timeout=max(0.1, deadline - time.monotonic()))
            break
        except KafkaException as exc:
            # A coordinator that moves or loads answers at once: ask again until the deadline.
            if error_code(exc) not in COORDINATOR_ERRORS or time.monotonic() + _RETRY_S > deadline:
                log.info("committed offsets of %s not known (%s): asked again later", topic, exc)
                return wanted
            time.sleep(_RETRY_S)
    out = []
    for tp in got:
        if tp.error is not None:
            out.append(TopicPartition(tp.topic, tp.partition, OFFSET_INVALID))
        else:  # no commit yet: from the beginning, as auto.offset.reset = earliest says
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            out.append(TopicPartition(tp.topic, tp.partition, offset))
    return out


def any_unknown(starts: Iterable[TopicPartition]) -> bool:
    """Whether :func:`committed_starts` left a partition for librdkafka to look up itself.

    Its answer can be lost too (a request timed out while the coordinator stalled: a relay's
    partitions assigned so after a 12 s broker stall were never fetched), so a worker that
    assigns such a start checks soon after that the partition has started
    (:func:`restart_unstarted`).
    """
    return any(tp.offset == OFFSET_INVALID for tp in starts)


def coordinator_trouble(batch: Iterable[Message]) -> bool:
    """Whether a consumed batch carries a coordinator error event (see the module's note)."""
    for msg in batch:
        err = msg.error()
        if err is not None and err.code() in COORDINATOR_ERRORS:
            return True
    return False


def restart_unstarted(consumer: _Consumer, timeout_s: float) -> bool:
    """Assign again, at their committed offsets, the partitions that have not consumed yet.

    A partition that has consumed nothing has no position; it may be waiting for an offset
    answer that was lost, or merely have nothing to read. Restarting it at its committed
    offset is harmless either way: it re-reads nothing its group has not committed past.
    Returns whether every such partition was restarted; ``False``: a committed offset is still
    unknown (the caller asks again a little later).
    """
    assigned = consumer.assignment()
    if not assigned:
        return True
    unstarted = [tp for tp in consumer.position(assigned) if tp.offset < 0]
    by_topic: dict[str, list[int]] = {}
    for tp in unstarted:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    restarted: list[TopicPartition] = []
    complete = True
    for topic, partitions in by_topic.items():
        found = committed_starts(consumer, topic, partitions, timeout_s)
        starts = [tp for tp in found if tp.offset != OFFSET_INVALID]
        complete = complete and len(starts) == len(found)
        if starts:
            consumer.incremental_unassign([TopicPartition(tp.topic, tp.partition) for tp in starts])
            consumer.incremental_assign(starts)
            restarted.extend(starts)
    if restarted:
        log.warning(
            "coordinator error: restarted %d partition(s) not yet started at their committed"
            " offsets: %s",
            len(restarted),
            ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in restarted),
        )
    return complete
