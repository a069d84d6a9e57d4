"""Where a relay member reads ``prices.raw[k]`` from, for each partition it works on.

The relay's input consumer (:class:`~pricing_ha.dedupe.relay_worker.RelayWorker`'s) reads the
partitions the member emits on, and those read ahead of a takeover (:mod:`.read_ahead`). Every
position it reads a partition from is decided here:

* **taken up**: from the raw group's committed offset, asked for explicitly
  (:meth:`RawInput.start_positions`) or, for a partition read ahead, with what was kept from
  the committed offset as it stands at the takeover (:meth:`RawInput.start_reading`);
* **paused** mid-batch (no longer led, the event saying why not yet applied): rewound to its
  first record not processed (:meth:`RawInput.rewind`);
* **committed**: up to the last record processed, never past one the arbiter still holds in
  its reorder window (:meth:`RawInput.commits`).

Starting below a later commit is harmless (the arbiter drops what the standby's marks cover);
starting above what was emitted would lose it, so every position comes from a commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaException,
    TopicPartition,
)

from pricing_ha.dedupe.arbitration import Arbiter
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.records import RawPrice
from pricing_ha.kafka.fetching import FETCH_WAIT_MS
from pricing_ha.kafka.positions import any_unknown, committed_starts

__all__ = ["FETCH_SETTINGS", "RawInput"]

log = logging.getLogger("pricing_ha.relay")

_COMMITTED_TIMEOUT_S = 2.0  # the raw group's committed offsets, asked at a takeover

#: Fetch settings of the relay's consumers (``prices.raw`` and the standby tail of ``prices``).
#:
#: At most 64 KiB per partition and per fetch request. The records of one fetch response are
#: handed over partition by partition, so after a takeover one partition's backlog must not
#: fill whole responses ahead of the others' first records. Apache Kafka honours the
#: per-partition limit, which alone interleaves the partitions; the per-request limit covers a
#: broker that fills a response from the partitions in request order up to the request's limit
#: (librdkafka starts each request one partition further on). librdkafka wants
#: message.max.bytes <= fetch.max.bytes; a record batch larger than that is still returned
#: whole. (librdkafka also prefetches up to 100,000 records, so partitions taken up after others
#: wait behind the earlier ones' prefetched backlog. Lowering queued.min.messages made that
#: worse: a partition whose queue is full is not fetched again for fetch.queue.backoff.ms, 1 s
#: by default. Left at the default; pricing_ha.kafka.fetching.PACING sets both for pacing.)
FETCH_SETTINGS: Mapping[str, Any] = {
    "fetch.wait.max.ms": FETCH_WAIT_MS,
    "log.connection.close": False,
    "max.partition.fetch.bytes": 65536,
    "fetch.max.bytes": 65536,
    "message.max.bytes": 65536,
}


class RawInput:
    """The positions the relay's input consumer reads ``prices.raw`` partitions from."""

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        read_ahead: ReadAhead,
        *,
        starting: Callable[[list[int], bool], None],
    ) -> None:
        """``starting`` is told of partitions assigned to the consumer (their first fetch is
        awaited), and whether any of them was assigned without a known start."""
        self._consumer = consumer
        self._topic = topic
        self._ahead = read_ahead
        self._starting = starting

    def warm(self, timeout_s: float = 5.0) -> None:
        """Learn ``prices.raw``'s metadata now, before any takeover needs it.

        A consumer that has never read the topic first asks for its metadata when a partition
        is assigned, and only then fetches: 0.6 s from the assignment to the first record on
        the local broker, against 3 ms once the metadata is known. A relay that had just
        joined paid it on every partition it took up (0.8 s to its first record). A failure
        here changes nothing but that.
        """
        try:
            self._consumer.list_topics(self._topic, timeout_s)
        except KafkaException as exc:
            log.info(
                "metadata of %s not known yet (%s): learnt at the first takeover", self._topic, exc
            )

    def start_positions(self, partitions: list[int]) -> list[TopicPartition]:
        """Where each partition taken up starts: the raw group's committed offset, asked here.

        Assigned without an offset, librdkafka looks the committed offset up itself, but only
        while none of this consumer's commits is in flight and one assignment at a time; in the
        fault drill two of four partitions taken over processed their first record 4.2 and
        4.6 s after the takeover. Assigned at an offset, a partition is fetched at once.
        Starting earlier than the latest commit is harmless (the arbiter drops what the marks
        already cover), so a commit racing this query loses nothing; a query that fails
        leaves the lookup to librdkafka (``OFFSET_INVALID``; :mod:`pricing_ha.kafka.positions`).
        """
        return committed_starts(self._consumer, self._topic, partitions, _COMMITTED_TIMEOUT_S)

    def read_ahead(self, partitions: list[int]) -> None:
        """Start reading ``partitions`` ahead of their takeover, from the committed offset as
        it stands now (:mod:`.read_ahead`)."""
        if partitions:
            starts = self.start_positions(partitions)
            self._ahead.start(starts)
            self._starting(partitions, any_unknown(starts))

    def start_reading(self, partitions: list[int]) -> None:
        """Partitions just taken up: their records go to the hot path.

        One read ahead starts with what was kept, from the raw group's committed offset as it
        stands now, after the takeover marker (why: :mod:`.read_ahead`); if that offset is not
        known, the read ahead is given up. The others are assigned at the committed offset
        (:meth:`start_positions`), in one call.
        """
        ahead = [p for p in partitions if p in self._ahead]
        plain = [p for p in partitions if p not in ahead]
        if ahead:
            try:
                got = self._consumer.committed(
                    [TopicPartition(self._topic, p) for p in ahead], timeout=_COMMITTED_TIMEOUT_S
                )
            except KafkaException as exc:
                log.info("committed offsets of %s not known (%s): read again", ahead, exc)
                got = []
            known = {tp.partition: tp.offset for tp in got if tp.error is None}
            for partition in ahead:
                if partition not in known:
                    self._ahead.stop(partition)
                    plain.append(partition)
                    continue
                count, first = self._ahead.take(partition, known[partition])
                log.info(
                    "partition %d: %d records read ahead (from offset %s), taken from the "
                    "committed offset %d",
                    partition,
                    count,
                    "-" if first is None else first,
                    known[partition],
                )
        if plain:
            starts = self.start_positions(plain)
            self._consumer.incremental_assign(starts)
            self._starting(plain, any_unknown(starts))

    def rewind(self, partition: int, offset: int) -> bool:
        """Read ``partition`` again from ``offset``; ``False`` if the seek failed."""
        try:
            self._consumer.seek(TopicPartition(self._topic, partition, offset))
        except KafkaException:
            return False
        return True

    def commits(
        self, last: Mapping[int, int], arbiters: Mapping[int, Arbiter[RawPrice]], lost: set[int]
    ) -> list[TopicPartition]:
        """The positions to commit after a batch whose last record per partition is ``last``:
        never past a record the partition's arbiter still holds, nothing for ``lost`` (the next
        owner re-reads from the previous commit: nothing is lost)."""
        commits = []
        for partition, offset in last.items():
            arbiter = arbiters.get(partition)
            if partition in lost or arbiter is None:
                continue
            held = [item.offset for item in arbiter.held()]
            commits.append(TopicPartition(self._topic, partition, min([offset + 1, *held])))
        return commits

    def stop(self, partition: int) -> None:
        """Stop reading ``partition`` (and forget what was read ahead of it)."""
        self._consumer.incremental_unassign([TopicPartition(self._topic, partition)])
        self._ahead.forget(partition)
