"""A fake ``prices`` for the standby tail's tests: the log it reads, and reading it to its end."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Message, TopicPartition

from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.publishing.pricing import Price, encode_price

TOKEN = "r1/abc"


class Log:
    """Partitions of a fake ``prices`` topic, and a reader that serves what was appended."""

    def __init__(self, partitions: int) -> None:
        """Empty partitions."""
        self.records: list[list[Message]] = [[] for _ in range(partitions)]
        self.served = [0] * partitions
        self.eof_sent = [False] * partitions
        self.assigned: list[TopicPartition] = []
        self.closed = False
        self.end_error: Exception | None = None

    def append(self, partition: int, **fields: Any) -> int:
        """Append a record; returns its offset."""
        offset = len(self.records[partition])
        self.records[partition].append(
            Message(topic="prices", partition=partition, offset=offset, **fields)
        )
        self.eof_sent[partition] = False
        return offset

    def price(self, partition: int, instrument: str, seq: int, *, header: bool = True) -> int:
        """Append a price as the relay emits it (with a ``seq`` header unless told not to)."""
        p = Price(instrument=instrument, seq=seq, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
        headers = [("seq", str(seq).encode())] if header else [("group", b"p1")]
        return self.append(
            partition, key=instrument.encode(), value=encode_price(p), headers=headers
        )

    def control(
        self,
        partition: int,
        kind: bytes,
        marker: str,
        term: int | None = None,
        *extra: tuple[str, bytes],
    ) -> int:
        """Append a control record (with ``extra`` headers)."""
        headers = [(CONTROL_HEADER, kind), ("marker", marker.encode())]
        if term is not None:
            headers.append(("term", str(term).encode()))
        headers.extend(extra)
        return self.append(partition, key=None, value=b"", headers=headers)

    # -- the reader surface -------------------------------------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Serve exactly ``partitions``, each from its offset (a logical offset: the start)."""
        self.assigned = partitions
        wanted = {tp.partition: max(0, tp.offset) for tp in partitions}
        for p in range(len(self.records)):
            self.served[p] = wanted.get(p, len(self.records[p]))
            self.eof_sent[p] = p not in wanted

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]:
        """The partition's first and next offsets (or the error set in ``end_error``)."""
        if self.end_error is not None:
            raise self.end_error
        return 0, len(self.records[partition.partition])

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        """Everything not served yet, then an end-of-partition event per partition."""
        out: list[Message] = []
        for p, records in enumerate(self.records):
            take = records[self.served[p] : self.served[p] + num_messages - len(out)]
            out.extend(take)
            self.served[p] += len(take)
            if len(out) >= num_messages:
                break
            if not self.eof_sent[p]:
                self.eof_sent[p] = True
                err = KafkaError(KafkaError._PARTITION_EOF)
                out.append(Message(topic="prices", partition=p, offset=len(records), error=err))
        return out[:num_messages]

    def close(self) -> None:
        """Remember the close."""
        self.closed = True


def tail_of(log: Log, *, token: str = TOKEN, resume: bool = False) -> StandbyTail:
    tail = StandbyTail({}, "prices", len(log.records), token, reader=lambda _s: log, resume=resume)
    tail.open()
    return tail


def read_to_end(tail: StandbyTail, log: Log) -> None:
    for _ in range(1000):
        if all(v.position >= len(r) for v, r in zip(tail.views, log.records, strict=True)):
            return
        tail.step(0)
    raise AssertionError("the tail did not reach the end")
