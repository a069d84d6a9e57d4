"""The relay simulation's fake consumers, reading the world's in-memory topics.

* :class:`FakeReader` serves ``prices`` to a standby tail, with end-of-partition events only
  once it really is at the end; it can be silent (a delayed first fetch, a stalled fetcher).
* :class:`FakeConsumer` serves ``prices.raw`` from the relay group's committed offsets.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from tests.sim.relay.relay_world import message

if TYPE_CHECKING:
    from tests.sim.relay.relay_world import World


class FakeReader:
    """The standby tail's consumer of ``prices``."""

    def __init__(self, world: World, owner: str) -> None:
        """A reader of member ``owner``."""
        self._world = world
        self._owner = owner
        self.positions: dict[int, int] = {}
        self._eof_sent: dict[int, bool] = {}

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Read exactly ``partitions``, each from its offset (a logical offset: the start)."""
        self.positions = {tp.partition: max(0, tp.offset) for tp in partitions}
        self._eof_sent = dict.fromkeys(self.positions, False)

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]:
        """The partition's first and next offsets."""
        return 0, len(self._world.logs[self._world.prices][partition.partition])

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        """What was appended since, then one end-of-partition event per partition at its end."""
        world = self._world
        if world.clock.now < world.faults[self._owner].silent_until:
            return []
        out: list[Message] = []
        log = world.logs[world.prices]
        for p in sorted(self.positions):
            records = log[p]
            pos = self.positions[p]
            take = records[pos : pos + max(0, num_messages - len(out))]
            out.extend(take)
            self.positions[p] = pos + len(take)
            if take:
                self._eof_sent[p] = False
            at_end = self.positions[p] == len(records)
            if at_end and not self._eof_sent[p] and len(out) < num_messages:
                self._eof_sent[p] = True
                err = KafkaError(KafkaError._PARTITION_EOF)
                out.append(message(world.prices, p, len(records), error=err))
        return out

    def close(self) -> None:
        """Nothing to close."""


class FakeConsumer:
    """The relay's ``prices.raw`` consumer (manual assignment, shared committed offsets)."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        """Metadata: nothing the simulation needs."""
        return object()

    def __init__(self, world: World) -> None:
        """A consumer in the relay group."""
        self._world = world
        self.positions: dict[int, int] = {}
        self.paused: set[int] = set()

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        """The group's committed offsets, or the query fails (one time in four): the relay
        then leaves the lookup to the consumer (assigns without an offset)."""
        if self._world.rng.random() < 0.25:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        committed = self._world.committed
        return [
            TopicPartition(tp.topic, tp.partition, committed.get(tp.partition, OFFSET_INVALID))
            for tp in partitions
        ]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Start each partition at its given offset, else the group's committed offset (else
        the beginning)."""
        for tp in partitions:
            if tp.offset >= 0:
                self.positions[tp.partition] = tp.offset
            elif tp.offset == OFFSET_BEGINNING:
                self.positions[tp.partition] = 0
            else:
                self.positions[tp.partition] = self._world.committed.get(tp.partition, 0)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Stop reading."""
        for tp in partitions:
            self.positions.pop(tp.partition, None)
            self.paused.discard(tp.partition)

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching these partitions (they stay assigned)."""
        self.paused.update(tp.partition for tp in partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Fetch them again, from their positions."""
        self.paused.difference_update(tp.partition for tp in partitions)

    def seek(self, partition: TopicPartition) -> None:
        """Read an assigned partition again from ``partition.offset`` (or its beginning)."""
        if partition.partition not in self.positions:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        if partition.offset == OFFSET_BEGINNING:
            self.positions[partition.partition] = 0
        elif partition.offset >= 0:
            self.positions[partition.partition] = partition.offset
        else:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG))

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        """Store the offsets (last write wins, as with manual assignment in Kafka)."""
        for tp in offsets:
            self._world.committed[tp.partition] = tp.offset

    def take(self, limit: int, rng: random.Random) -> list[Message]:
        """Up to ``limit`` records from the assigned partitions, interleaved."""
        log = self._world.logs[self._world.raw]
        out: list[Message] = []
        parts = sorted(set(self.positions) - self.paused)
        rng.shuffle(parts)
        for p in parts:
            pos = self.positions[p]
            take = log[p][pos : pos + rng.randint(0, limit)]
            out.extend(take)
            self.positions[p] = pos + len(take)
        return out
