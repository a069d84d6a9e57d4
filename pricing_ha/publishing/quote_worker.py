"""A publisher member's quote worker: quotes priced, prices produced, positions committed.

:class:`QuoteWorker` does the Kafka work of one publisher member (:mod:`.publisher`), all of
it in one worker thread (:mod:`pricing_ha.member.worker`): for every partition k it leads, it
consumes ``md.quotes[k]``, prices each quote (:mod:`.pricing`) and produces the canonical bytes
to ``prices.raw[k]``; invalid quotes go to the dead-letter topic with the reason, by the rule
every role shares (:mod:`pricing_ha.kafka.dead_letter`). Quote
positions are committed to :func:`quotes_group_id` only after everything produced for them, and
for every quote before them, is acknowledged. A batch's output is not waited for before the
next batch is read: each partition's share of a batch (:class:`~.shares.Share`) counts down as
acknowledgements arrive through delivery callbacks, and positions are committed as they settle.

A price producer that a delivery error shows to be finished
(:func:`~pricing_ha.kafka.producers.producer_is_wedged`, e.g. after records timed out while the
broker was paused) is replaced between batches; every partition with output still pending
is replayed from its first unacknowledged quote, like any failed output. Until the new
producer delivers, the member is not ready (:meth:`QuoteWorker.output_problem`).

Telemetry (:mod:`pricing_ha.telemetry`): a quote whose headers carry a sampled W3C
``traceparent`` (the feed sampled it) gets a ``process md.quotes`` span and its price a
``send prices.raw`` span, whose context travels on in the price's headers; other quotes create
no span. Prices published, end-to-end latency and per-instrument staleness are counted per
batch, and the member's counters in :class:`PublisherStats`.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Message, TopicPartition
from opentelemetry.trace import Span, Status, StatusCode

from pricing_ha.config import AppConfig
from pricing_ha.kafka.dead_letter import DeadLetters, bounded_reason
from pricing_ha.kafka.fetching import FETCH_WAIT_MS
from pricing_ha.kafka.headers import HeaderValue
from pricing_ha.kafka.lookups import LookupConsumer
from pricing_ha.kafka.positions import any_unknown, committed_starts
from pricing_ha.kafka.producers import ProducerClient, ReplaceableProducer
from pricing_ha.kafka.replay_backoff import ReplayBackoff
from pricing_ha.member.worker import COMMITTED_TIMEOUT_S, FLUSH_TIMEOUT_S, PartitionWorker
from pricing_ha.publishing.pricing import ParamsBook, encode_price
from pricing_ha.publishing.quotes import InvalidQuoteError, SequenceGuard, parse_quote
from pricing_ha.publishing.shares import PublisherStats, Share
from pricing_ha.telemetry import Telemetry
from pricing_ha.telemetry.pricepath import (
    TRACEPARENT,
    child_context,
    end_on_delivery,
    sampled_context,
    traceparent_of,
)
from pricing_ha.telemetry.tally import PriceTally

__all__ = ["MESSAGE_TIMEOUT_MS", "PublisherStats", "QuoteWorker", "quotes_group_id"]

# The publisher's logger (the worker's records belong to the member).
log = logging.getLogger("pricing_ha.publisher")

#: librdkafka's per-record delivery deadline for prices (its default is 300 s).
MESSAGE_TIMEOUT_MS = int(FLUSH_TIMEOUT_S * 1000 * 2 / 3)


def quotes_group_id(group: str) -> str:
    """The consumer group holding publishing group ``group``'s committed quote positions."""
    return f"pricing.{group}.quotes"


class QuoteWorker(PartitionWorker):
    """Consumes quotes, prices them, produces prices and commits, in one thread."""

    def __init__(
        self,
        cfg: AppConfig,
        group: str,
        member: str,
        leads: Callable[[int], bool],
        stats: PublisherStats,
        *,
        telemetry: Telemetry,
    ) -> None:
        broker = cfg.broker
        super().__init__(
            f"quotes-{group}",
            LookupConsumer(
                broker.client_config(
                    defaults={"fetch.wait.max.ms": FETCH_WAIT_MS, "log.connection.close": False},
                    required={
                        "group.id": quotes_group_id(group),
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        # A group's first leader starts from the beginning: nothing is skipped.
                        "auto.offset.reset": "earliest",
                        "client.id": f"{member}-quotes",
                    },
                )
                | telemetry.kafka_stats.settings(),  # lag on md.quotes
                logger=log,
            ),
            leads,
        )
        self._cfg = cfg
        self._group = group
        self._member = member
        self.stats = stats
        self._book = ParamsBook.from_config(cfg.pricing)
        self._guards: dict[int, SequenceGuard] = {}
        self._raw_topic = cfg.topics.raw
        # Every price's identity headers, built once.
        self._group_header: tuple[str, HeaderValue] = ("group", group.encode())
        self._member_header: tuple[str, HeaderValue] = ("member", member.encode())
        self._confirmed: set[int] = set()  # led partitions confirmed in this batch
        self._path = telemetry.price_path()
        self._consumer_group = quotes_group_id(group)
        #: Invalid quotes' dead letters (pricing_ha.kafka.dead_letter), through a producer of
        #: their own, built at the first one.
        self.dead_letters = DeadLetters(
            broker.client_config(
                defaults={"linger.ms": 5, "log.connection.close": False},
                required={
                    "client.id": f"{member}-dlq",
                    "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                },
            ),
            topic=cfg.topics.dlq,
            source_topic=cfg.topics.quotes,
            identity=[("group", group.encode()), ("member", member.encode())],
            logger=log,
        )
        metrics = telemetry.metrics
        self._tally = PriceTally(
            metrics, metrics.prices_published, stage="publish", attributes={"group": group}
        )
        self._tally.declare(range(cfg.topics.partitions))
        # partition -> its shares of batches whose output is not settled yet, oldest first
        self._pending: dict[int, deque[Share]] = {}
        self._replays = ReplayBackoff()
        # Replaced when a delivery error says it is wedged (pricing_ha.kafka.producers): what
        # it held is purged, its callbacks mark the partitions failed, and they are replayed.
        self.producer: ReplaceableProducer[ProducerClient] = ReplaceableProducer(
            broker.client_config(
                defaults={
                    # A broker's cost is mostly per produce request, not per record: a few
                    # ms of batching saves broker CPU, and the flush at the end of each batch
                    # sends at once whatever linger.ms says.
                    "linger.ms": 5,
                    "log.connection.close": False,
                    # Below the flush timeout, so every record of a batch is acknowledged or
                    # failed (its callback run) before the batch's positions are committed.
                    "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                },
                required={
                    "acks": "all",
                    "enable.idempotence": True,
                    "partitioner": "murmur2_random",
                    "client.id": f"{member}-prices",
                },
            )
            | telemetry.kafka_stats.settings(),  # queue depth, broker round trips
            name=f"{member}-prices",
            logger=log,
        )

    def _new_guard(self) -> SequenceGuard:
        """A partition's seq check, bounded by ``limits.max_instruments_per_partition``, with
        the configured bounds on jumps (``[sequence]``)."""
        bounds = self._cfg.sequence
        return SequenceGuard(
            self._cfg.limits.max_instruments_per_partition,
            max_seq_jump=bounds.max_seq_jump,
            max_epoch_skew_ms=bounds.max_epoch_skew_ms,
        )

    def assign(self, partition: int) -> None:
        """Consume ``md.quotes[partition]`` from the group's committed position."""
        self._guards[partition] = self._new_guard()
        topic = self._cfg.topics.quotes
        starts = committed_starts(self.consumer, topic, [partition], COMMITTED_TIMEOUT_S)
        self.consumer.incremental_assign(starts)
        self.starting([partition], unknown=any_unknown(starts))

    def unassign(self, partition: int) -> None:
        """Wait for the partition's output and commit it, then stop consuming it."""
        if self._pending.get(partition):
            self._wait_for_output()
        self._pending.pop(partition, None)
        self._replays.forget(partition)
        self.consumer.incremental_unassign([TopicPartition(self._cfg.topics.quotes, partition)])
        self._guards.pop(partition, None)
        self._tally.forget_partition(partition)

    def close_clients(self) -> None:
        """Flush prices, commit what they acknowledge, then close the quote consumer."""
        self._wait_for_output()
        self.producer.close(0)
        self.consumer.close()

    def idle(self) -> None:
        """Serve delivery callbacks and commit what they acknowledge."""
        self.producer.poll(0)
        self.dead_letters.poll()
        self._settle()

    def output_problem(self) -> str | None:
        """Why prices cannot be delivered now (the price producer's problem), or ``None``."""
        return self.producer.problem

    def _recover(self) -> None:
        """Replace a wedged price producer; every partition with output pending is replayed.

        The old producer's records are purged (their callbacks fail them), but librdkafka may
        drop some without a callback, so every share still pending is failed here.
        """
        if self.producer.replace_if_wedged() is not None:
            self.stats.producer_replacements = self.producer.replacements
            for queue in self._pending.values():
                for share in queue:
                    share.failed = True

    def process(self, batch: list[Message]) -> None:
        """Price a batch and queue the prices; commit the positions already acknowledged.

        The batch's output is not waited for: each partition's share of the batch becomes a
        :class:`Share` whose records count down as their acknowledgements arrive, and a
        position is committed only when every earlier share of that partition is
        acknowledged too (:meth:`_settle`). Waiting here (a flush per batch) would leave the
        consumer idle for a broker round trip per batch and send one small produce request
        per batch, which is what bounded throughput before.
        """
        skipped: set[int] = set()
        shares: dict[int, Share] = {}
        # Partitions whose leadership was confirmed in this batch (see _leads_now).
        self._confirmed.clear()
        priced: dict[int, int] = {}
        for msg in batch:
            err = msg.error()
            partition = msg.partition()
            if err is not None or partition is None:
                log.warning("quote consumer: %s", err)
                continue
            share = shares.get(partition)
            if share is None and (partition not in self.active or partition in skipped):
                continue
            if share is None and self._replays.holds(partition):
                continue  # its replay waits out a backoff (re-read from there after)
            if partition not in self._confirmed and not self._leads_now(partition):
                # Leadership ended: stop at once. The position is not committed past this
                # quote, so whoever leads next starts from here.
                self.stats.not_leader_skips += 1
                skipped.add(partition)
                continue
            offset = msg.offset()
            if offset is None:
                continue
            if share is None:
                share = shares[partition] = Share(offset, self.stats)
                self._pending.setdefault(partition, deque()).append(share)
            share.last = offset
            share.outstanding += 1
            if self._handle(msg, partition, offset, share):
                priced[partition] = priced.get(partition, 0) + 1
        stats = self.stats
        for partition, n in priced.items():
            stats.priced += n
            stats.per_partition[partition] = stats.per_partition.get(partition, 0) + n
        self.producer.poll(0)
        self.dead_letters.poll()
        self._settle()
        self._tally.flush()
        for partition in skipped:
            self.drop(partition)  # resumed from the committed position once led again

    def _settle(self) -> None:
        """Commit acknowledged positions; replay partitions whose output failed."""
        # Before the commits: replacing a wedged producer fails what it still held.
        self._recover()
        topics = self._cfg.topics
        now = time.monotonic()
        for partition, offset in self._replays.due(now):
            self.consumer.seek(TopicPartition(topics.quotes, partition, offset))
        commits = []
        for partition, queue in self._pending.items():
            upto: int | None = None
            while queue and queue[0].outstanding <= 0 and not queue[0].failed:
                upto = queue.popleft().last + 1
                self._replays.delivered(partition)
            if any(share.failed for share in queue):
                # Output failed: replay from the first quote of the first share not known to
                # be delivered (duplicates are harmless: the relay drops them); after a
                # permanent error again, not at once (pricing_ha.kafka.replay_backoff).
                failed_at = queue[0].first
                permanent = any(share.permanent for share in queue)
                queue.clear()  # later acknowledgements of these shares are ignored
                wait_s = self._replays.failed(partition, permanent=permanent)
                if wait_s > 0:
                    self._replays.hold(partition, failed_at, now + wait_s)
                else:
                    self.consumer.seek(TopicPartition(topics.quotes, partition, failed_at))
                self._guards[partition] = self._new_guard()
                upto = failed_at if failed_at > 0 else None
            if upto is not None:
                commits.append(TopicPartition(topics.quotes, partition, upto))
        if commits:
            self.commit_async(commits)

    def _wait_for_output(self) -> None:
        """Flush, then commit what was acknowledged (a revocation's barrier waits for this)."""
        started = time.monotonic()
        if self.producer.flush(FLUSH_TIMEOUT_S):
            # Still unacknowledged: not committed; whoever leads next re-reads from the last
            # commit (duplicates at worst).
            self.stats.flush_timeouts += 1
            log.error("prices not acknowledged within %.0f s", FLUSH_TIMEOUT_S)
        # Dead letters within what is left of the same bound (none pending: no wait at all).
        self.dead_letters.flush(max(0.0, FLUSH_TIMEOUT_S - (time.monotonic() - started)))
        self._settle()
        self.commit_async([], now=True)

    def _leads_now(self, partition: int) -> bool:
        """Ask NELI whether this member leads ``partition``; remember a yes for the batch.

        Asked once per partition per batch, at its first quote, not before every quote: the
        batch's records of a partition are produced right after (a few milliseconds of CPU
        at most), and a wait for room in the producer's queue, the one thing that can hold
        them back longer, forgets every yes (:meth:`_produce`), so the quotes after it ask
        again. A publisher's output needs no more than that: a record produced just after
        leadership ended is a duplicate the relay drops (both groups produce every price, and
        non-exclusive leadership already allows two leaders of a partition for a moment).
        """
        if self.leads(partition):
            self._confirmed.add(partition)
            return True
        return False

    def _produce(self, topic: str, **kwargs: Any) -> None:
        """Queue one record; while librdkafka's queue is full, serve acknowledgements first.

        Output is not waited for per batch, so a slow broker fills the local queue; waiting
        here is the back-pressure that then slows consumption down. A wait forgets the
        leadership confirmed for the batch (:meth:`_leads_now`): later quotes ask NELI again.
        """
        while True:
            try:
                self.producer.produce(topic, **kwargs)
            except BufferError:
                self._confirmed.clear()
                self.producer.poll(0.05)
                continue
            return

    def _handle(self, msg: Message, partition: int, offset: int, share: Share) -> bool:
        """Price one quote and produce it (or dead-letter it); whether it was priced."""
        topics = self._cfg.topics
        parent = sampled_context(msg.headers())
        if parent is None:  # the common case: no span objects at all
            return self._price(msg, partition, offset, share, None)
        key = msg.key()
        process = self._path.start_process(
            topics.quotes,
            parent,
            partition=partition,
            offset=offset,
            key=key.decode("utf-8", "replace") if isinstance(key, bytes) else "",
            consumer_group=self._consumer_group,
        )
        try:
            return self._price(msg, partition, offset, share, process)
        finally:
            process.end()

    def _price(
        self,
        msg: Message,
        partition: int,
        offset: int,
        share: Share,
        process: Span | None,
    ) -> bool:
        on_delivery: Callable[[KafkaError | None, Message], None] = share.on_delivery
        try:
            quote = parse_quote(msg.value(), msg.key())
            check = self._guards[partition].check(quote.instrument, quote.seq, quote.epoch)
            if not check.ok:
                raise InvalidQuoteError(check.reason or "bad sequence")
            self.stats.seq_gaps += check.gap
            price = self._book.price(quote)
        except InvalidQuoteError as exc:
            if process is not None:
                reason = bounded_reason(exc.reason).decode()
                process.set_status(Status(StatusCode.ERROR, reason))
                process.set_attribute("pricing_ha.dead_letter.reason", reason)
            self.stats.dead_lettered += 1
            # Its own producer and rule (pricing_ha.kafka.dead_letter): whatever the DLQ does,
            # the share counts this quote done once the dead letter is settled.
            self.dead_letters.send(
                partition=partition,
                offset=offset,
                key=msg.key(),
                value=msg.value(),
                reason=exc.reason,
                on_settled=share.settled,
            )
            return False
        now_ns = time.time_ns()
        headers: list[tuple[str, HeaderValue]] = [
            ("seq", str(price.seq).encode()),
            self._group_header,
            self._member_header,
            ("publish_ns", str(now_ns).encode()),
        ]
        if process is not None:
            process.set_attribute("pricing_ha.seq", price.seq)
            send = self._path.start_send(
                self._raw_topic,
                child_context(process),
                key=quote.instrument,
                partition=partition,
                attributes={"pricing_ha.seq": price.seq},
            )
            headers.append((TRACEPARENT, traceparent_of(send)))
            on_delivery = end_on_delivery(send, on_delivery)
        self._produce(
            self._raw_topic,
            key=msg.key(),  # the instrument's UTF-8 bytes: parse_quote checked it
            value=encode_price(price),
            partition=partition,
            headers=headers,
            on_delivery=on_delivery,
        )
        self._tally.add(partition, quote.instrument, (now_ns - quote.source_time_ns) / 1e9, None)
        return True
