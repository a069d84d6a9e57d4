"""Where the relay's prices go: ``prices`` (with trace context, fail-over spans, metrics), its DLQ.

:class:`RelayOutput` produces each arbitrated emission to ``prices[k]``, after checking, for
every record at the moment of producing, that this relay still leads k. Each record carries the
allow-listed headers of :mod:`.relayed` (``seq`` from the value, the publisher's identity and
time, trace context) and gets ``relay`` and ``relay_ns``; its value is the canonical encoding
of the price arbitrated on. On the way it

* traces sampled prices: a raw record whose ``traceparent`` is sampled is offered inside a
  ``process prices.raw`` span (:meth:`RelayOutput.offer_traced`; its ``pricing_ha.arbitration``
  says ``emitted``, ``duplicate``, ``held`` or ``not leader``) and its emission gets a
  ``send prices`` span, whose context replaces the publisher's ``traceparent``;
* records every switch of publisher as a ``relay.switch {instrument}`` span
  (:func:`pricing_ha.dedupe.failover_spans.trace_switch`), sampled or not;
* counts prices relayed, latencies (end-to-end from the source time, and the hop from the
  publisher) and staleness per batch, and the arbiters' duplicates and gaps.

Malformed raw records go to the raw dead-letter topic (:meth:`RelayOutput.dead_letter`). At
the end of each batch (:meth:`RelayOutput.flush`), and when idle (:meth:`RelayOutput.poll`),
it returns the partitions whose output failed, to be started over (:mod:`.hot_path`).

The producers it writes through, with fencing and the replacement of a wedged producer, are
:mod:`.output_producers`; the control records on ``prices`` (markers, checkpoints,
ticks) are written by :mod:`.control_writer`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import msgspec
from confluent_kafka import KafkaError, Message, Producer
from opentelemetry.context import Context
from opentelemetry.trace import Span

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.arbitration import Arbiter, Emission
from pricing_ha.dedupe.failover_spans import trace_switch
from pricing_ha.dedupe.fences import FENCE_ERRORS
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.records import RawPrice
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.kafka.headers import HeaderValue
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.member.worker import FLUSH_TIMEOUT_S
from pricing_ha.telemetry import Telemetry
from pricing_ha.telemetry.pricepath import (
    child_context,
    end_on_delivery,
    traceparent_of,
    with_traceparent,
)
from pricing_ha.telemetry.tally import PriceTally

__all__ = ["RelayOutput"]

log = logging.getLogger("pricing_ha.relay")


class RelayOutput:
    """The relay's prices, dead letters and their telemetry (see the module docstring). Worker
    thread only.

    Args:
        cfg: the configuration (topics).
        member: this relay member's name.
        raw_group: the consumer group of the relay's ``prices.raw`` positions.
        producers: the member's producers, which everything here goes through.
        leads: whether this relay leads a partition, asked for every record.
        stats: the member's counters.
        telemetry: spans and metrics.
    """

    def __init__(
        self,
        cfg: AppConfig,
        member: str,
        raw_group: str,
        producers: OutputProducers,
        leads: Callable[[int], bool],
        *,
        stats: RelayStats,
        telemetry: Telemetry,
    ) -> None:
        """Declare the metrics (every partition's series from zero); nothing is produced yet."""
        self._cfg = cfg
        self._member = member
        self._raw_group = raw_group
        self._producers = producers
        self._on_delivery = producers.on_delivery
        self._leads = leads
        self.stats = stats
        self._tracer = telemetry.tracer()
        self._path = telemetry.price_path()
        self._metrics = telemetry.metrics
        self._tally = PriceTally(self._metrics, self._metrics.prices_relayed, stage="relay")
        self._tally.declare(range(cfg.topics.partitions))
        self._metrics.declare_defects("relay", range(cfg.topics.partitions))
        self._reported: dict[int, tuple[int, int]] = {}  # partition -> (duplicates, gaps) so far

    # -- partitions ---------------------------------------------------------------------------

    def track(self, partition: int, arbiter: Arbiter[RawPrice]) -> None:
        """Start reporting ``arbiter``'s duplicates and gaps (from its current counts)."""
        self._reported[partition] = (arbiter.duplicates, arbiter.gaps)

    def forget(self, partition: int) -> None:
        """Stop reporting on ``partition`` (report what is pending first); end its producer."""
        self._producers.fences.discard(partition)
        self._reported.pop(partition, None)
        self._tally.forget_partition(partition)

    # -- producing ----------------------------------------------------------------------------

    def emit(self, partition: int, emissions: list[Emission[RawPrice]]) -> bool:
        """Produce ``emissions`` to ``prices[partition]``; False once it is no longer led."""
        if not emissions:
            return True
        return self._produce(partition, emissions)

    def _produce(self, partition: int, emissions: list[Emission[RawPrice]]) -> bool:
        topic = self._cfg.topics.prices
        now_ns = time.time_ns()
        relay_ns = str(now_ns).encode()
        member = self._member.encode()
        tally = self._tally
        producers = self._producers
        producer: Producer | ReplaceableProducer[Producer] = producers.producer
        for e in emissions:
            item = e.item
            headers: list[tuple[str, HeaderValue]] = [
                *item.headers,
                ("relay", member),
                ("relay_ns", relay_ns),
            ]
            send: Span | None = None
            on_delivery: Callable[[KafkaError | None, Message], None] = self._on_delivery
            if item.trace is not None:
                send = self._path.start_send(
                    topic,
                    item.trace,
                    key=e.instrument,
                    partition=partition,
                    attributes={"pricing_ha.seq": e.seq, "pricing_ha.source": e.source},
                )
                headers = with_traceparent(headers, traceparent_of(send))
                on_delivery = self._chain(end_on_delivery(send))
            # Leadership is checked immediately before the produce call, with the record
            # already built: a process frozen between the check and the call produces once it
            # wakes, and only its fence (a successor's init_transactions) stops that record.
            if not self._leads(partition):
                if send is not None:
                    send.end()
                self.stats.not_leader_skips += 1
                return False
            if producer is producers.producer:  # once per call: the partition's fence
                fence = producers.fences.begin(partition)
                if fence is None:
                    if send is not None:
                        send.end()
                    return False  # no producer of its own: only a takeover may give it one
                producer = fence
            try:
                producer.produce(
                    topic,
                    key=item.key,
                    value=item.value,
                    partition=partition,
                    headers=headers,
                    on_delivery=on_delivery,
                )
            except FENCE_ERRORS as exc:
                # A fenced transactional producer refuses every record (librdkafka's fatal
                # error): the partition's output failed, as a failed commit would say; the
                # worker died of it, and every partition the relay held went silent with it.
                if send is not None:
                    send.end()
                producers.fences.lose(partition, f"a record was refused: {exc}")
                return False
            self.stats.relayed += 1
            hop_s = (now_ns - item.publish_ns) / 1e9 if item.publish_ns else None
            tally.add(partition, e.instrument, (now_ns - item.source_ns) / 1e9, hop_s)
            if e.switched_from is not None:
                self.stats.switches += 1
                trace_switch(
                    self._tracer,
                    e,
                    stage="relay",
                    partition=partition,
                    observer=self._member,
                    at_ns=now_ns,
                    price_span=None if send is None else send.get_span_context(),
                )
        return True

    def offer_traced(
        self,
        arbiter: Arbiter[RawPrice],
        partition: int,
        item: RawPrice,
        what: tuple[str, int, str, int],
        *,
        parent: Context,
        now: float,
    ) -> bool:
        """Offer one sampled record (instrument, seq, source, epoch) and emit, in its process
        span."""
        instrument, seq, source, epoch = what
        process = self._path.start_process(
            self._cfg.topics.raw,
            parent,
            partition=partition,
            offset=item.offset,
            key=instrument,
            consumer_group=self._raw_group,
            attributes={"pricing_ha.seq": seq, "pricing_ha.source": source},
        )
        try:
            item = msgspec.structs.replace(item, trace=child_context(process))
            duplicates = arbiter.duplicates
            emissions = arbiter.offer(instrument, seq, item, source, now, epoch=epoch)
            if any(e.item is item for e in emissions):
                outcome = "emitted"
            else:
                outcome = "duplicate" if arbiter.duplicates > duplicates else "held"
            ok = self.emit(partition, emissions)
            process.set_attribute("pricing_ha.arbitration", outcome if ok else "not leader")
            return ok
        finally:
            process.end()

    def dead_letter(self, msg: Message, partition: int, offset: int, reason: str) -> None:
        """Send a malformed raw record to the raw dead-letter topic, with the reason (bounded,
        the payload capped, failures handled: :mod:`pricing_ha.kafka.dead_letter`)."""
        self.stats.dead_lettered += 1
        self._producers.dead_letters.send(
            partition=partition, offset=offset, key=msg.key(), value=msg.value(), reason=reason
        )

    def reject(self, partition: int, item: RawPrice, reason: str) -> None:
        """Send a raw price the arbiter rejected (out of bounds, unconfirmed by the other group)
        to the raw dead-letter topic, with the reason (as :meth:`dead_letter`)."""
        self.stats.unconfirmed += 1
        self._producers.dead_letters.send(
            partition=partition, offset=item.offset, key=item.key, value=item.value, reason=reason
        )

    def commit_floor(self, partition: int) -> int | None:
        """The lowest offset of ``partition`` whose dead letter is not settled yet (its input
        is not committed past it), or ``None``."""
        return self._producers.dead_letters.floor(partition)

    # -- end of a batch -----------------------------------------------------------------------

    def _chain(
        self, then: Callable[[KafkaError | None, Message], None]
    ) -> Callable[[KafkaError | None, Message], None]:
        def delivered(err: KafkaError | None, msg: Message) -> None:
            self._on_delivery(err, msg)
            then(err, msg)

        return delivered

    def flush(self, arbiters: Mapping[int, Arbiter[RawPrice]]) -> set[int]:
        """Wait for every record to be acknowledged, report metrics; return failed partitions."""
        producers = self._producers
        remaining = producers.producer.flush(FLUSH_TIMEOUT_S)
        producers.dead_letters.poll()  # sent beside the prices: mostly settled by now
        producers.fences.commit_open()
        self._tally.flush()
        self.report(arbiters)
        failed = producers.take_failed()
        if remaining:
            failed |= set(arbiters)  # not acknowledged in time: nothing may be committed
        return failed

    def poll(self, arbiters: Mapping[int, Arbiter[RawPrice]]) -> set[int]:
        """Serve delivery callbacks and report metrics, without waiting (idle time)."""
        producers = self._producers
        producers.producer.poll(0)
        producers.dead_letters.poll()
        producers.fences.commit_open()  # what expired from the reorder windows becomes visible now
        if self._tally.pending:
            self._tally.flush()
        self.report(arbiters)
        return producers.take_failed()

    def report(self, arbiters: Mapping[int, Arbiter[RawPrice]]) -> None:
        """Add the arbiters' new duplicates and gaps to the metrics."""
        metrics = self._metrics
        for partition, arbiter in arbiters.items():
            dups, gaps = self._reported.get(partition, (0, 0))
            if arbiter.duplicates == dups and arbiter.gaps == gaps:
                continue
            attrs = {"stage": "relay", "partition": str(partition)}
            if arbiter.duplicates > dups:
                metrics.duplicates_dropped.add(arbiter.duplicates - dups, attrs)
            if arbiter.gaps > gaps:
                metrics.gaps.add(arbiter.gaps - gaps, attrs)
            self._reported[partition] = (arbiter.duplicates, arbiter.gaps)
