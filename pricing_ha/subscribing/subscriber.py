"""The subscriber library: typed prices, in order, each seq once, with gaps reported.

Two modes:

* **relay** (default) reads ``prices``, the relay's deduplicated output. The relay already
  emits each ``(instrument, seq)`` once and in order, so any copy at or below the previous seq
  is a relay defect: it is dropped, never delivered, and counted in ``duplicates``.
* **direct** reads ``prices.raw`` and arbitrates both publishing groups' copies itself (A/B
  line arbitration) with the same :class:`~pricing_ha.dedupe.arbitration.Arbiter` as the relay and
  the relay's reorder window (``relay.reorder_window_ms``): no relay hop at all.

In both modes a jump in seq is delivered at once (relay mode) or after the reorder window
(direct mode) and reported as a gap, and :attr:`Subscriber.stats` keeps per-instrument
figures computed from the delivered stream (see :mod:`pricing_ha.subscribing.stats`). With
telemetry, sampled prices end their trace here, direct-mode switches of publisher are spans,
and deliveries are measured (:mod:`pricing_ha.subscribing.telemetry`).

Partitions are assigned manually (no consumer group membership, nothing committed): every
partition, or with an instrument filter only the partitions those instruments live on. The
consumer runs on a thread of its own (:class:`~._reader.AssignedReader`, shared with the
standalone :class:`~.client.PriceClient`). Usage::

    async with Subscriber(cfg, direct=True) as sub:
        async for d in sub:
            print(d.instrument, d.seq, d.price.mid, d.gap_before)
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Message, TopicPartition

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.arbitration import Arbiter, Bounds, Emission
from pricing_ha.dedupe.control import RESET
from pricing_ha.kafka.fetching import FETCH_WAIT_MS
from pricing_ha.kafka.headers import CONTROL_HEADER, header_list, is_control
from pricing_ha.publishing.pricing import InvalidPriceError, decode_price
from pricing_ha.subscribing._reader import AssignedReader, fetch_batch, wanted_partitions
from pricing_ha.subscribing.delivery import Copy, Delivery, price_headers
from pricing_ha.subscribing.stats import SubscriberStats
from pricing_ha.subscribing.telemetry import SubscriberTelemetry
from pricing_ha.telemetry import Telemetry
from pricing_ha.telemetry.ratelimited import RateLimitedWarnings

__all__ = ["ConsumerLike", "Delivery", "Subscriber"]

log = logging.getLogger("pricing_ha.subscriber")

_WAIT_S = 0.1  # longest single poll, so stop requests and window expiries are seen promptly


class ConsumerLike(Protocol):
    """The part of confluent-kafka's ``Consumer`` a subscriber uses (a fake in unit tests)."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Cluster metadata."""
        ...

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Assigns partitions at the given offsets."""
        ...

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` records, waiting at most ``timeout`` seconds."""
        ...

    def close(self) -> None:
        """Closes the consumer."""
        ...


class Subscriber(AssignedReader):
    """Reads prices (from the relay, or both groups' raw copies) as an async iterator.

    Args:
        cfg: the application configuration (topics, broker, relay reorder window).
        direct: arbitrate ``prices.raw`` locally instead of reading ``prices``.
        instruments: deliver only these instruments (all when ``None``), assigning only
            their partitions.
        from_beginning: start at the beginning of every partition instead of the end.
        clock: monotonic seconds, for silences and reorder deadlines.
        wall_ns: wall clock in nanoseconds, for latencies.
        consumer_factory: builds the consumer from its configuration (confluent-kafka's
            ``Consumer`` by default; a fake in unit tests).
        telemetry: where spans and metrics go (default: nowhere).
    """

    def __init__(
        self,
        cfg: AppConfig,
        *,
        direct: bool = False,
        instruments: Iterable[str] | None = None,
        from_beginning: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
        consumer_factory: Callable[[dict[str, Any]], ConsumerLike] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """Prepares the subscriber; nothing connects until :meth:`start`."""
        super().__init__(thread_name="subscriber")
        self.cfg = cfg
        self.direct = direct
        self.topic = cfg.topics.raw if direct else cfg.topics.prices
        self.from_beginning = from_beginning
        self._instruments = None if instruments is None else list(instruments)
        self._keys = None if self._instruments is None else {i.encode() for i in self._instruments}
        self._clock = clock
        self._wall_ns = wall_ns
        self._consumer_factory = consumer_factory or (lambda conf: Consumer(conf, logger=log))
        # The relay's output is in order already: a 0 s window delivers a jump at once.
        window_s = cfg.relay.reorder_window_ms / 1000 if direct else 0.0
        # Direct mode arbitrates both groups' copies as the relay does, with its bounds; the
        # relay's output has one source, nobody to confirm a jump: its marks are trusted.
        bounds = (
            Bounds(
                max_seq_jump=cfg.sequence.max_seq_jump,
                max_epoch_skew_ms=cfg.sequence.max_epoch_skew_ms,
            )
            if direct
            else None
        )
        self.arbiter: Arbiter[Copy] = Arbiter(window_s, bounds)
        # A broken or hostile topic can repeat one problem per record: one line per interval.
        self._warnings = RateLimitedWarnings(log, cfg.limits.warn_interval_ms / 1000)
        # As many instruments as the relay admits over every partition (``[limits]``): a flood
        # of new names on prices.raw (direct mode) cannot grow the arbiter without limit.
        self._max_instruments = cfg.topics.partitions * cfg.limits.max_instruments_per_partition
        self.stats = SubscriberStats(
            direct=direct,
            topic=self.topic,
            max_silence_bound_s=cfg.subscriber.max_silence_bound_s,
        )
        self._consumer: ConsumerLike | None = None
        # Never joined or committed: assign() needs no group, librdkafka needs an id.
        self.group_id = f"pricing-ha-subscriber-{uuid.uuid4().hex[:12]}"
        self._telemetry = SubscriberTelemetry(
            telemetry, topic=self.topic, group_id=self.group_id, direct=direct
        )
        self._telemetry.declare(range(cfg.topics.partitions))

    async def start(self) -> None:
        """Connects and assigns every partition of the topic (those of the filter, if any).

        Raises:
            BrokerUnavailableError: if the broker does not answer in time.
            TopicLayoutError: if the topic does not exist.
        """
        broker = self.cfg.broker
        self._consumer = self._consumer_factory(
            broker.client_config(
                defaults={"fetch.wait.max.ms": FETCH_WAIT_MS, "log.connection.close": False},
                required={
                    "group.id": self.group_id,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    # The relay writes prices in transactions: a deposed owner's aborted
                    # records must never be seen (librdkafka's default; not left to it).
                    "isolation.level": "read_committed",
                },
            )
        )
        count = await self._partition_count(
            self.topic, broker.bootstrap_servers, broker.connect_timeout_ms / 1000
        )
        wanted = wanted_partitions(self._instruments, count)
        start = OFFSET_BEGINNING if self.from_beginning else OFFSET_END
        assigned = sorted(wanted) if wanted is not None else range(count)
        tps = [TopicPartition(self.topic, p, start) for p in assigned]
        await self._call(self._consumer.assign, tps)
        mode = "direct" if self.direct else "relay"
        log.info("subscribed to %s (%d partitions, %s mode)", self.topic, len(tps), mode)

    def __aiter__(self) -> AsyncIterator[Delivery]:
        """Every delivery, until :meth:`close`."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Delivery]:
        while not self._closed:
            for delivery in await self.poll(_WAIT_S):
                yield delivery

    async def poll(self, timeout_s: float = _WAIT_S) -> list[Delivery]:
        """Waits up to ``timeout_s`` (less if a reorder window ends sooner) for prices.

        Returns:
            The deliveries now due, in seq order per instrument; empty after :meth:`close`.
        """
        consumer = self._consumer
        if consumer is None or self._closed:
            return []
        wait = timeout_s
        deadline = self.arbiter.next_deadline()
        if deadline is not None:
            wait = max(0.0, min(wait, deadline - self._clock()))
        msgs = await self._call(fetch_batch, consumer, wait)
        now, wall = self._clock(), self._wall_ns()
        out: list[Delivery] = []
        for msg in msgs:
            self._offer(msg, now, wall, out)
        if deadline is not None:
            self._deliver(self.arbiter.expire(now), now, wall, out)
        for copy, reason in self.arbiter.take_rejected():
            self.stats.invalid += 1
            log.warning("dropped %s/%s: %s", copy.partition, copy.offset, reason)
        self._telemetry.flush()
        return out

    @property
    def started(self) -> bool:
        """Whether :meth:`start` assigned the partitions and :meth:`close` was not called."""
        return self._consumer is not None and not self._closed

    def _offer(self, msg: Message, now: float, wall: int, out: list[Delivery]) -> None:
        err = msg.error()
        if err is not None:
            self.stats.errors += 1
            self._warnings.warn("consumer error", "consumer error on %s: %s", self.topic, err)
            return
        key = msg.key()
        if is_control(key, msg.headers()):
            self._control(msg)  # a relay's takeover marker, or an operator's reset: no price
            return
        if self._keys is not None and key not in self._keys:
            return
        try:
            price = decode_price(msg.value())
        except InvalidPriceError as exc:
            self.stats.invalid += 1
            self._warnings.warn(
                "undecodable",
                "undecodable price at %s/%s: %s",
                msg.partition(),
                msg.offset(),
                exc,
            )
            return
        if key is not None and key != price.instrument.encode():
            self.stats.invalid += 1
            self._warnings.warn("wrong key", "price of %s under key %r", price.instrument, key)
            return
        arbiter = self.arbiter
        if (
            not arbiter.knows(price.instrument)
            and arbiter.instrument_count() >= self._max_instruments
        ):
            self.stats.invalid += 1
            self._warnings.warn(
                "instrument limit",
                "price of a new instrument refused: %d instruments already (limits)",
                self._max_instruments,
            )
            return
        source, publish_ns, traceparent, bad = price_headers(msg)
        if bad:
            self.stats.bad_headers += 1
            self._warnings.warn(
                "bad headers",
                "price at %s/%s: malformed publish_ns ignored",
                msg.partition(),
                msg.offset(),
            )
        copy = Copy(price, msg.partition() or 0, msg.offset() or 0, publish_ns)
        span = self._telemetry.start_process(
            traceparent,
            partition=copy.partition,
            offset=copy.offset,
            instrument=price.instrument,
            seq=price.seq,
            source=source,
        )
        dropped = arbiter.duplicates
        emissions = arbiter.offer(price.instrument, price.seq, copy, source, now, epoch=price.epoch)
        if arbiter.duplicates != dropped:
            self.stats.on_dropped(price.instrument)
            self._telemetry.dropped(copy.partition)
        self._deliver(emissions, now, wall, out)
        if span is not None:  # a sampled price: its trace ends here
            delivered = any(e.item is copy for e in emissions)
            held = "duplicate" if arbiter.duplicates != dropped else "held"
            span.set_attribute("pricing_ha.arbitration", "delivered" if delivered else held)
            span.end()

    def _control(self, msg: Message) -> None:
        """An operator's reset of an instrument's mark on ``prices`` resets this subscriber's
        check of it too (:mod:`pricing_ha.dedupe.mark_reset`)."""
        values = dict(header_list(msg.headers()))
        if self.direct or values.get(CONTROL_HEADER) not in (RESET, RESET.decode()):
            return
        raw = values.get("instrument") or b""
        instrument = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        self.arbiter.reset_mark(instrument)
        self.stats.instrument(instrument).reset_mark()
        log.warning("mark of %s reset by an operator (prices offset %s)", instrument, msg.offset())

    def _deliver(
        self, emissions: list[Emission[Copy]], now: float, wall: int, out: list[Delivery]
    ) -> None:
        stats = self.stats
        for e in emissions:
            c = e.item
            if e.gap_before:
                self._warnings.warn(
                    "gap", "%s: %d seq(s) missing before %d", e.instrument, e.gap_before, e.seq
                )
            if e.switched_from is not None:
                log.info("%s: publisher switch %s -> %s", e.instrument, e.switched_from, e.source)
            delivery = Delivery(
                c.price,
                c.partition,
                c.offset,
                e.source,
                e.gap_before,
                e.switched_from,
                e.silence_s,
                c.publish_ns,
                wall,
            )
            stats.instrument(e.instrument).on_delivered(
                e.seq, now, switched=e.switched_from is not None, epoch=e.epoch
            )
            if c.publish_ns is not None:
                stats.publish_latency_s.append((wall - c.publish_ns) / 1e9)
            stats.source_latency_s.append((wall - c.price.source_time_ns) / 1e9)
            self._telemetry.delivered(
                e,
                partition=c.partition,
                source_ns=c.price.source_time_ns,
                publish_ns=c.publish_ns,
                wall=wall,
            )
            out.append(delivery)
