"""A trivial forwarder, one OS process: the reference price path of
``bench/price_path/line_rate.py``.

It has the product's shape minus the product's work: the same fetch loop as the partition
worker (:mod:`pricing_ha.member.worker`: ``poll(FIRST_WAIT_S)`` for one record, then
``consume(BATCH - 1, 0)`` for what else has arrived), the same client settings as the
publisher and the relay (:data:`CONSUMER_SETTINGS`, :func:`producer_settings`), one delivery
callback per record, and commits of the consumed positions once their output is acknowledged.
No NELI, no pricing, no arbitration, no standby, no telemetry.

Roles (every partition of IN is assigned by hand, in a consumer group of the process's own):

* ``publish --name G``: each record goes unchanged (key, value, headers) to the same partition
  of OUT, with a ``group`` header G added (a publisher's copy says which group made it).
* ``relay --keep G``: reads both groups' copies from IN and writes to the same partition of OUT
  only those whose ``group`` header is G. It reads the volume the product's relays read (two
  copies of each price) and writes the volume they write (one), with no arbitration: dropping
  the other group's copy by its header is the cheapest stand-in for deduplication. Its output
  therefore follows group G alone (its latency is G's path, not the earlier of two copies).
  Unlike the product it is one process, and it reads nothing back from OUT (the product's
  relays also tail ``prices`` for their standby).

Loop shapes:

* flush per batch (the default; the publishers' loop before it was pipelined, and the shape
  of the relay's, which flushes each batch): produce the batch, ``flush()``, then commit the
  batch's next positions with ``commit(asynchronous=True)``;
* ``--pipelined``: no flush; ``poll(0)`` on every turn serves the delivery callbacks, and each
  partition's position is committed (asynchronously) up to what has been acknowledged (the
  publishers' loop today, :meth:`pricing_ha.publishing.quote_worker.QuoteWorker.process`).

On SIGTERM it finishes the batch, flushes, commits and prints one JSON line of counts.

Run: ``python -m bench.price_path.forwarder publish|relay BOOTSTRAP IN OUT PARTITIONS (--name G |
--keep G) [--pipelined]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import uuid
from functools import partial
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, Message, Producer, TopicPartition

from pricing_ha.config import AppConfig
from pricing_ha.kafka.headers import header_list
from pricing_ha.kafka.partitioning import KEYED_PRODUCER_SETTINGS
from pricing_ha.kafka.producers import PRODUCER_DEFAULTS
from pricing_ha.member.worker import BATCH, FIRST_WAIT_S, FLUSH_TIMEOUT_S
from pricing_ha.publishing.quote_worker import MESSAGE_TIMEOUT_MS

#: The input consumer's settings: the publisher's quote consumer and the relay's raw consumer.
CONSUMER_SETTINGS: dict[str, str | int | float | bool] = {
    "fetch.wait.max.ms": 10,
    "log.connection.close": False,
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
}


def producer_settings(role: str) -> dict[str, str | int | float | bool]:
    """The output producer's settings: the publisher's price producer, or the relay's.

    Both: :data:`~pricing_ha.kafka.producers.PRODUCER_DEFAULTS` (added by the product's
    ``ReplaceableProducer``), ``acks=all``, idempotence; ``linger.ms`` 5 for the publisher's
    (as in :mod:`pricing_ha.publishing.quote_worker`), 1 for the relay's. The publisher's also
    sets Kafka's partitioner and a ``message.timeout.ms`` below its flush timeout; the relay's
    a ``message.timeout.ms`` of its session timeout (records are produced to an explicit
    partition either way).
    """
    common: dict[str, str | int | float | bool] = {
        **PRODUCER_DEFAULTS,
        "linger.ms": 1,
        "log.connection.close": False,
        "acks": "all",
        "enable.idempotence": True,
    }
    if role == "publish":
        return {
            **common,
            **KEYED_PRODUCER_SETTINGS,
            "linger.ms": 5,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        }
    return {**common, "message.timeout.ms": max(500, AppConfig().relay.session_timeout_ms)}


class Forwarder:
    """Consumes IN, produces to OUT (same partition), commits; see the module docstring."""

    def __init__(
        self,
        bootstrap: str,
        role: str,
        topics: tuple[str, str],
        partitions: int,
        *,
        group: str,
        pipelined: bool,
    ) -> None:
        """Create the clients, assign every partition of IN and connect the producer."""
        self.role = role
        self.source, self.target = topics
        self.group = group.encode()
        self.pipelined = pipelined
        self.forwarded = 0
        self.skipped = 0
        self.failures = 0
        self.batches = 0
        self.stopping = False
        self._handled: dict[int, int] = {}  # partition -> last input offset handled
        self._acked: dict[int, int] = {}  # partition -> last input offset acknowledged
        self._outstanding = dict.fromkeys(range(partitions), 0)  # produced, not acknowledged
        self._committed: dict[int, int] = {}  # partition -> next offset committed
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                **CONSUMER_SETTINGS,
                "group.id": f"bench-forward-{role}-{group}-{uuid.uuid4().hex[:8]}",
                "client.id": f"forward-{role}-{group}",
            }
        )
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                **producer_settings(role),
                "client.id": f"forward-{role}-{group}-out",
            }
        )
        self.consumer.assign(
            [TopicPartition(self.source, p, OFFSET_INVALID) for p in range(partitions)]
        )
        self.consumer.list_topics(self.source, timeout=10)
        self.producer.list_topics(self.target, timeout=10)

    def run(self) -> None:
        """Forward until :attr:`stopping`; then flush and commit what was acknowledged."""
        while not self.stopping:
            first = self.consumer.poll(FIRST_WAIT_S)
            if first is None:
                self.producer.poll(0)
                if self.pipelined:
                    self._commit()
                continue
            self._forward([first, *self.consumer.consume(BATCH - 1, 0)])
            self.batches += 1
            if self.pipelined:
                self.producer.poll(0)
            elif self.producer.flush(FLUSH_TIMEOUT_S):
                raise RuntimeError(f"output not acknowledged within {FLUSH_TIMEOUT_S:.0f} s")
            self._commit()
        self.producer.flush(FLUSH_TIMEOUT_S)
        self._commit()
        self.consumer.close()

    def _forward(self, batch: list[Message]) -> None:
        for msg in batch:
            partition, offset = msg.partition(), msg.offset()
            if msg.error() is not None or partition is None or offset is None:
                continue
            headers = header_list(msg.headers())
            if self.role == "publish":
                headers.append(("group", self.group))
            elif next((v for k, v in headers if k == "group"), None) != self.group:
                self.skipped += 1
                self._handled[partition] = offset
                continue
            on_delivery = partial(self._delivered, partition, offset)
            while True:
                try:
                    self.producer.produce(
                        self.target,
                        key=msg.key(),
                        value=msg.value(),
                        headers=headers,
                        partition=partition,
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self._outstanding[partition] += 1
            self._handled[partition] = offset
            self.forwarded += 1

    def _delivered(self, partition: int, offset: int, err: KafkaError | None, _: Message) -> None:
        self._outstanding[partition] -= 1
        if err is not None:
            self.failures += 1
            print(f"delivery failed: {err}", file=sys.stderr)
            return
        # An idempotent producer acknowledges a partition's records in the order produced.
        self._acked[partition] = max(offset, self._acked.get(partition, -1))

    def _commit(self) -> None:
        """Commit each partition up to its last handled record whose output is acknowledged."""
        commits = []
        for partition, handled in self._handled.items():
            # Nothing outstanding: every handled record (skipped ones too) is done.
            done = handled if not self._outstanding[partition] else self._acked.get(partition)
            if done is not None and done + 1 > self._committed.get(partition, 0):
                commits.append(TopicPartition(self.source, partition, done + 1))
                self._committed[partition] = done + 1
        if commits:
            self.consumer.commit(offsets=commits, asynchronous=True)

    def counts(self) -> dict[str, Any]:
        """What it did, for its exit line."""
        return {
            "role": self.role,
            "group": self.group.decode(),
            "pipelined": self.pipelined,
            "forwarded": self.forwarded,
            "skipped": self.skipped,
            "batches": self.batches,
            "records_per_batch": round((self.forwarded + self.skipped) / max(1, self.batches), 1),
            "delivery_failures": self.failures,
        }


def main() -> None:
    """Parse the arguments, forward until SIGTERM or SIGINT, print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("role", choices=("publish", "relay"))
    parser.add_argument("bootstrap")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("partitions", type=int)
    parser.add_argument("--name", help="publish: the group header added to each record")
    parser.add_argument("--keep", help="relay: forward only records of this group")
    parser.add_argument("--pipelined", action="store_true", help="no flush per batch")
    args = parser.parse_args()
    group = args.name if args.role == "publish" else args.keep
    if not group:
        parser.error("publish needs --name, relay needs --keep")
    forwarder = Forwarder(
        args.bootstrap,
        args.role,
        (args.source, args.target),
        args.partitions,
        group=group,
        pipelined=args.pipelined,
    )

    def stop(*_: object) -> None:
        forwarder.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"ready {time.monotonic():.3f}", flush=True)
    forwarder.run()
    print(json.dumps(forwarder.counts()), flush=True)
    if forwarder.failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
