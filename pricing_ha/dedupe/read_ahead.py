"""Reading ``prices.raw[k]`` ahead of a takeover, so that the takeover starts from records in hand.

A relay member in its grace period for partition k (after its probe, see
:meth:`pricing_ha.dedupe.relay_worker.RelayWorker.tend`) assigns ``prices.raw[k]`` from the
raw group's committed offset as it stands then and *keeps* what it reads, without processing
it. The takeover then hands what was kept to the hot path first, instead of asking for the
committed offset and waiting for a first fetch after the grace period (or after the release
that ended it): 0.03-2.4 s, median 0.27 s per takeover in the takeover benchmark on a loaded
machine, in every crash, hand-over and join. Reading from the committed offset as it stands at
the start is safe however long the grace period lasts: the offset only moves on.

What was kept is processed only from the committed offset as it stands *at the takeover*, after
the takeover marker (:meth:`ReadAhead.take`): an owner handing over commits what it emitted once
it is acknowledged, and a record of its that landed after the successor's marker (its flush was
slow) is above the marks, so reading it again would emit it twice. Starting at the latest commit
skips what such an owner has committed, as a takeover without reading ahead does (seen in the
takeover benchmark: 212 duplicates when every kept record was replayed).

At most :attr:`ReadAhead.max_kept` records are kept per partition; past that, its fetching is
paused and positioned just after the last record kept, until the takeover resumes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, Message, TopicPartition

__all__ = ["LINGER_S", "MAX_KEPT", "ReadAhead"]

#: Records kept per partition read ahead, then its fetching pauses until the takeover.
MAX_KEPT = 20_000
#: A read ahead is given up once its partition has been neither in its grace period, nor
#: wanted, nor led for this long (between the end of the grace period and the takeover, NELI
#: waits for the member's own heartbeat on its new incarnation: not led for a moment, yet about
#: to be taken up).
LINGER_S = 2.0


class ReadAhead:
    """The partitions of ``topic`` read ahead of their takeover by one consumer.

    Used from the worker thread that owns ``consumer`` (it assigns, pauses and seeks it).

    Args:
        consumer: the relay worker's ``prices.raw`` consumer (assigned by hand).
        topic: ``prices.raw``'s name.
        max_kept: records kept per partition before its fetching pauses.
        clock: a monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        max_kept: int = MAX_KEPT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Nothing read ahead yet."""
        self._consumer = consumer
        self._topic = topic
        self.max_kept = max_kept
        self._clock = clock
        self._kept: dict[int, list[Message]] = {}  # partition -> records read ahead, in order
        self._full: set[int] = set()  # of those, paused at max_kept records
        self._idle: dict[int, float] = {}  # of those, not in grace, wanted or led: since when
        self._replay: list[Message] = []  # taken up: processed before the next poll's records
        self._skip_below: dict[int, int] = {}  # taken up: the committed offset it was taken at

    def __contains__(self, partition: object) -> bool:
        """Whether ``partition`` is being read ahead."""
        return partition in self._kept

    def kept(self, partition: int) -> int:
        """How many records of ``partition`` are kept now (0 if it is not read ahead)."""
        return len(self._kept.get(partition, ()))

    def reading(self) -> bool:
        """Whether anything is read ahead or waits to be replayed (the consumer must be polled)."""
        return bool(self._kept or self._replay)

    def start(self, positions: list[TopicPartition]) -> None:
        """Assign these partitions at ``positions`` and keep what they deliver."""
        self._consumer.incremental_assign(positions)
        for tp in positions:
            self._kept[tp.partition] = []

    def stop(self, partition: int) -> None:
        """``partition`` is not to be taken up after all: unassign it, forget what was read."""
        self._kept.pop(partition, None)
        self._full.discard(partition)
        self._idle.pop(partition, None)
        self._consumer.incremental_unassign([TopicPartition(self._topic, partition)])

    def tend(self, still_coming: Callable[[int], bool]) -> None:
        """Give up the partitions ``still_coming`` has said no to for :data:`LINGER_S`."""
        now = self._clock()
        for partition in list(self._kept):
            if still_coming(partition):
                self._idle.pop(partition, None)
            elif now - self._idle.setdefault(partition, now) >= LINGER_S:
                self.stop(partition)

    def take(self, partition: int, committed: int) -> tuple[int, int | None]:
        """``partition`` is taken up at the raw group's ``committed`` offset (asked after the
        takeover marker; negative: nothing committed yet): what was kept from that offset on is
        replayed before the next records. Returns how many records were kept and the offset
        of the first."""
        kept = self._kept.pop(partition)
        self._idle.pop(partition, None)
        self._replay.extend(kept)
        if committed >= 0:
            self._skip_below[partition] = committed
        if partition in self._full:
            self._full.discard(partition)
            self._consumer.resume([TopicPartition(self._topic, partition)])
        first: int | None = kept[0].offset() if kept else None
        return len(kept), first

    def forget(self, partition: int) -> None:
        """``partition`` was taken up and is let go: drop what of it still waits to be replayed."""
        if self._replay:
            self._replay = [m for m in self._replay if m.partition() != partition]
        self._skip_below.pop(partition, None)

    def batch(self, batch: list[Message]) -> list[Message]:
        """The batch to process: what waits to be replayed first, then ``batch`` without the
        records of partitions still read ahead (kept)."""
        if self._replay:
            batch = [*self._replay, *batch]
            self._replay = []
        return self._keep(batch) if self._kept else batch

    def skipped(self, partition: int, offset: int) -> bool:
        """Whether a record of a partition taken up is below the committed offset it was taken
        at (:meth:`take`): the previous owner emitted it. Cheap once nothing is skipped."""
        below = self._skip_below.get(partition)
        if below is None:
            return False
        if offset < below:
            return True
        del self._skip_below[partition]
        return False

    @property
    def replaying(self) -> bool:
        """Whether records of a partition taken up wait to be replayed (:meth:`batch`)."""
        return bool(self._replay)

    @property
    def skipping(self) -> bool:
        """Whether any partition taken up still skips records (see :meth:`skipped`)."""
        return bool(self._skip_below)

    def _keep(self, batch: list[Message]) -> list[Message]:
        rest: list[Message] = []
        full: list[TopicPartition] = []
        for msg in batch:
            partition: int = msg.partition()  # type: ignore[assignment]
            kept = self._kept.get(partition)
            if kept is None:
                rest.append(msg)
            elif msg.error() is None and partition not in self._full:
                kept.append(msg)
                if len(kept) >= self.max_kept:
                    self._full.add(partition)
                    offset: int = msg.offset()  # type: ignore[assignment]
                    full.append(TopicPartition(self._topic, partition, offset + 1))
        if full:
            # Paused, then positioned just after the last record kept: records fetched past
            # it (later in this batch, or already on their way) are dropped, read again later.
            self._consumer.pause(full)
            for tp in full:
                self._consumer.seek(tp)
        return rest
