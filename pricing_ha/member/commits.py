"""A worker's input offset commits: held while a partition starts, spaced out, re-sent idle.

:class:`Commits` decides when the positions a :class:`~pricing_ha.member.worker.PartitionWorker`
has finished with go to its consumer group. Holding a commit back never loses anything (whoever
reads the partition next re-reads a little more, and what it re-emits is dropped downstream by
the relay's marks), so the rules below only trade re-reading for fewer requests:

* **while a partition starts** (taken up, no record read yet), commits are held, at most
  :data:`START_HOLD_S`: librdkafka does not start fetching a newly assigned partition while one
  of the consumer's commits is in flight;
* **at most every** :data:`COMMIT_EVERY_S`: the positions of the batches in between are merged
  (the latest per partition wins). A commit per batch was 88 commits/s per publisher at 1,000
  prices/s, measured under load (``bench.broker.requests``);
* **while the input is idle**, the last positions are committed again every
  :data:`RECOMMIT_IDLE_S`;
* **now** (a revocation's barrier, a close) sends everything held at once.
"""

from __future__ import annotations

import time

from confluent_kafka import Message, TopicPartition

__all__ = ["COMMIT_EVERY_S", "RECOMMIT_IDLE_S", "START_HOLD_S", "Commits"]

# librdkafka starts fetching a newly assigned partition only while none of the consumer's
# offset commits is in flight (it might need them as the start position; see
# rd_kafka_assignment_serve in rdkafka_assignment.c). A worker committing asynchronously after
# every batch nearly always has one in flight on a loaded broker: in the fault drill, a relay's
# partitions waited 1-5 s for their first record after a takeover. So commits are held back
# while a partition just taken up has not delivered its first record, at most this long.
# (Holding commits longer only means that a successor re-reads a little more.)
START_HOLD_S = 5.0
# The shortest time between two commits that are not forced (``now``).
COMMIT_EVERY_S = 0.1
# While its input is idle, a worker commits its partitions' last committed positions again this
# often. Another member that still believed it owned a partition (a zombie, or one fencing
# itself) may have committed an older position after ours: the group's position then stays
# behind, and its lag says so, until new input arrives. Found by the relay simulation.
RECOMMIT_IDLE_S = 1.0


class Commits:
    """The commit rules of one worker's input consumer (see the module docstring): it says
    what to commit when; the worker sends it."""

    def __init__(self) -> None:
        """Nothing held, nothing committed yet."""
        self.starting: dict[int, float] = {}  # taken up, no record read yet: since when
        self.held: dict[tuple[str, int], TopicPartition] = {}  # not sent yet, latest wins
        self._committed: dict[tuple[str, int], TopicPartition] = {}  # the last sent, per partition
        self._recommit_at = 0.0
        self._next_at = 0.0  # no commit that is not forced before this (monotonic)

    def start(self, partitions: list[int], now: float) -> None:
        """``partitions`` were just assigned: hold commits until each reads a record."""
        for partition in partitions:
            self.starting[partition] = now

    def read(self, batch: list[Message]) -> None:
        """``batch`` was read: its partitions have started."""
        for msg in batch:
            self.starting.pop(msg.partition(), None)  # type: ignore[arg-type]
            if not self.starting:
                return

    def due(self, offsets: list[TopicPartition], *, now: bool = False) -> list[TopicPartition]:
        """Take ``offsets`` in; return what to commit at this instant (empty: held until the
        rules allow). ``now``: everything held, at once."""
        for tp in offsets:
            self.held[(tp.topic, tp.partition)] = tp
        if not self.held:
            return []
        clock = time.monotonic()
        if not now:
            if self.starting:
                for partition, since in list(self.starting.items()):
                    if clock - since >= START_HOLD_S:
                        del self.starting[partition]
                if self.starting:
                    return []
            if clock < self._next_at:
                return []
        commits = list(self.held.values())
        self.held.clear()
        for tp in commits:
            self._committed[(tp.topic, tp.partition)] = tp
        self._next_at = clock + COMMIT_EVERY_S
        self._recommit_at = clock + RECOMMIT_IDLE_S
        return commits

    def idle(self) -> list[TopicPartition]:
        """A turn that read nothing: what was held, once due, and the last positions again
        every :data:`RECOMMIT_IDLE_S`; what to commit now."""
        if self.held:
            return self.due([])
        if self._committed and time.monotonic() >= self._recommit_at:
            return self.due(list(self._committed.values()))
        return []

    def forget(self, partition: int) -> None:
        """``partition`` is no longer worked on: what was committed for it is not committed
        again (taken up again later, it must not be committed from before)."""
        for key in [k for k in self._committed if k[1] == partition]:
            del self._committed[key]
