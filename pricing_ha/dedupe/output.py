"""Where the relay writes: ``prices`` (with trace context, fail-over spans, metrics) and its DLQ.

:class:`RelayOutput` produces each arbitrated emission to ``prices[k]``, after checking, for
every record at the moment of producing, that this relay still leads k. Each record keeps the
publisher's headers and gets ``relay`` and ``relay_ns``. On the way it

* traces sampled prices: a raw record whose ``traceparent`` is sampled is offered inside a
  ``process prices.raw`` span (:meth:`RelayOutput.offer_traced`; its ``pricing_ha.arbitration``
  says ``emitted``, ``duplicate``, ``held`` or ``not leader``) and its emission gets a
  ``send prices`` span, whose context replaces the publisher's ``traceparent``;
* records every switch of publisher as a ``relay.switch {instrument}`` span
  (:func:`pricing_ha.dedupe.failover_spans.trace_switch`), sampled or not;
* counts prices relayed, latencies (end-to-end from the source time, and the hop from the
  publisher) and staleness per batch, and the arbiters' duplicates and gaps.

**Fencing** (``[relay] fencing = "transactions"``; for Apache Kafka): each owned partition is
written by a transactional producer of its own (:class:`~pricing_ha.dedupe.fences.Fences`); a
takeover marker is written only after ``init_transactions`` fenced the previous owner, prices
are emitted inside transactions committed at the end of each batch and when idle, and a
partition whose transaction fails is started over. Probes and the dead-letter topic go
through the relay's one idempotent producer.

A producer that a delivery error shows to be finished
(:func:`~pricing_ha.kafka.producers.producer_is_wedged`: a fatal error, or records timed out
while the broker was paused, after which the embedded broker fences the idempotent producer
forever) is replaced at the end of the batch
(:class:`~pricing_ha.kafka.producers.ReplaceableProducer`). Every partition with output that
failed or was purged with the old producer is reported failed, so the relay starts it over
(rebuild from ``prices``, re-read ``prices.raw`` from the last commit), but only once the broker
has answered the new producer (:meth:`RelayOutput.may_resume`): a rebuild against a broker that
does not answer would find ``prices`` empty.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from opentelemetry.context import Context
from opentelemetry.trace import Span

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.arbitration import Arbiter, Emission
from pricing_ha.dedupe.control import (
    CHECKPOINT,
    HANDOVER,
    KEPT,
    PROBE,
    RELEASE,
    TAKEOVER,
    TICK,
)
from pricing_ha.dedupe.failover_spans import trace_switch
from pricing_ha.dedupe.fences import Fences
from pricing_ha.dedupe.records import RawPrice
from pricing_ha.kafka.headers import CONTROL_HEADER, HeaderValue
from pricing_ha.kafka.producers import PRODUCER_DEFAULTS, ConfigValue, ReplaceableProducer
from pricing_ha.member.worker import FLUSH_TIMEOUT_S
from pricing_ha.telemetry import Telemetry
from pricing_ha.telemetry.pricepath import (
    child_context,
    end_on_delivery,
    traceparent_of,
    with_traceparent,
)
from pricing_ha.telemetry.tally import PriceTally

__all__ = ["RelayOutput", "RelayStats"]

log = logging.getLogger("pricing_ha.relay")

_PROBE_TIMEOUT_S = 0.1  # one metadata request asking whether the broker answers again
_APPENDED_KEPT = 256  # acknowledged records remembered per partition, for read_as_of
_APPENDED_EVERY_S = 0.01  # at most one per this interval
#: linger.ms of the relay's producers. Each batch ends in a flush (or a commit, which flushes),
#: and a flush sends at once whatever linger.ms says (produce + flush 0.3 ms at linger 1, 10 and
#: 100 ms on the embedded broker), so linger costs the relay no latency. At 1 ms librdkafka's
#: broker thread spent its time polling, with few context switches, while records waited
#: (perf: poll, clock_gettime, rd_kafka_toppar_producer_serve): each relay used 22-24 % of a
#: core at 800 prices/s, 14-16 % at 10 ms.
_LINGER_MS = 10


@dataclass
class RelayStats:
    """Counters of one relay member."""

    relayed: int = 0
    dead_lettered: int = 0
    not_leader_skips: int = 0
    delivery_failures: int = 0
    takeovers: int = 0
    rebuild_s: list[float] = field(default_factory=list)
    switches: int = 0
    producer_replacements: int = 0  # wedged output producers replaced (partitions started over)
    checkpoints: int = 0  # checkpoint records written to prices


class RelayOutput:
    """The relay's producer and its telemetry (see the module docstring). Worker thread only.

    Args:
        cfg: the configuration (topics, broker, relay session timeout).
        member: this relay member's name.
        raw_group: the consumer group of the relay's ``prices.raw`` positions.
        leads: whether this relay leads a partition, asked for every record.
        stats: the member's counters.
        telemetry: spans and metrics.
    """

    def __init__(
        self,
        cfg: AppConfig,
        member: str,
        raw_group: str,
        leads: Callable[[int], bool],
        *,
        stats: RelayStats,
        telemetry: Telemetry,
        producer_factory: Callable[[dict[str, ConfigValue]], Producer] | None = None,
        parallel_commits: bool = True,
    ) -> None:
        """Create the producer (``producer_factory``: tests and the simulation pass a fake)."""
        self._cfg = cfg
        self._member = member
        self._raw_group = raw_group
        self._leads = leads
        self.stats = stats
        self._tracer = telemetry.tracer()
        self._path = telemetry.price_path()
        self._metrics = telemetry.metrics
        self._tally = PriceTally(self._metrics, self._metrics.prices_relayed, stage="relay")
        self._tally.declare(range(cfg.topics.partitions))
        self._metrics.declare_defects("relay", range(cfg.topics.partitions))
        self._reported: dict[int, tuple[int, int]] = {}  # partition -> (duplicates, gaps) so far
        self._failed: set[int] = set()  # partitions whose output was not acknowledged
        # partition -> (offset, monotonic time produced) of some acknowledged records
        self._appended: dict[int, deque[tuple[int, float]]] = {}
        self._unproven = False  # replaced, and the broker has not answered the new producer yet
        self._probed_at = float("-inf")
        #: Starts the ``marker`` header of this member's control records (one per process).
        self.token = f"{member}/{uuid.uuid4().hex[:12]}"
        self._markers = 0
        #: Whether each owned partition is written by a transactional producer of its own.
        self.fencing = cfg.relay.fencing == "transactions"
        message_timeout_ms = cfg.relay.output_timeout_ms
        self.fences = Fences(
            cfg.broker.client_config(
                defaults={
                    # The pipeline's producer defaults (one request in flight: see there), as
                    # the ReplaceableProducer below gets them.
                    **PRODUCER_DEFAULTS,
                    "linger.ms": _LINGER_MS,
                    "log.connection.close": False,
                    # A crashed owner's open transaction holds read_committed readers back
                    # until the next owner's init_transactions aborts it, or this timeout.
                    "transaction.timeout.ms": max(10_000, message_timeout_ms),
                },
                required={
                    "acks": "all",
                    "enable.idempotence": True,
                    "message.timeout.ms": message_timeout_ms,
                },
            ),
            id_prefix=f"{raw_group}.{cfg.topics.prices}",
            client_prefix=f"relay-{member}-prices",
            make=producer_factory or (lambda config: Producer(config, logger=log)),
            on_lost=self._failed.add,
            workers=cfg.topics.partitions if self.fencing and parallel_commits else 0,
        )
        self.producer: ReplaceableProducer[Producer] = ReplaceableProducer(
            cfg.broker.client_config(
                defaults={"linger.ms": _LINGER_MS, "log.connection.close": False},
                required={
                    "acks": "all",
                    "enable.idempotence": True,
                    "client.id": f"relay-{member}-prices",
                    # Output queued before a pause or a crash must expire, not land after a
                    # takeover: the next owner waits T + e + this after the owner's last
                    # heartbeat (RelayConfig.output_timeout_ms).
                    "message.timeout.ms": message_timeout_ms,
                },
            ),
            name=f"relay-{member}-prices",
            logger=log,
            factory=producer_factory,
        )

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self._note_appended(msg)
            return
        # Counted and logged (rate-limited) by the ReplaceableProducer, not per record.
        partition = msg.partition()
        self.stats.delivery_failures += 1
        if partition is not None:
            self._failed.add(partition)

    def _note_appended(self, msg: Message) -> None:
        """Remember (sparsely) when a record was produced that landed at an offset."""
        partition, offset = msg.partition(), msg.offset()
        if partition is None or offset is None or offset < 0:
            return
        produced = time.monotonic() - (msg.latency() or 0.0)
        seen = self._appended.setdefault(partition, deque(maxlen=_APPENDED_KEPT))
        if not seen or produced - seen[-1][1] >= _APPENDED_EVERY_S:
            seen.append((offset, produced))

    def read_as_of(self, partition: int, position: int) -> float:
        """A monotonic time before which everything appended to ``prices[partition]`` is below
        ``position``: when this member produced its latest record found below it (that record
        was appended after it was produced, and after everything appended before). Minus
        infinity when there is none."""
        seen = self._appended.get(partition)
        if not seen:
            return float("-inf")
        while len(seen) > 1 and seen[1][0] < position:
            seen.popleft()
        offset, produced = seen[0]
        return produced if offset < position else float("-inf")

    def _take_failed(self) -> set[int]:
        if self.producer.replace_if_wedged() is not None:
            # The purged records' callbacks have run: their partitions are in _failed too.
            self.stats.producer_replacements = self.producer.replacements
            self._unproven = True
        failed, self._failed = self._failed, set()
        return failed

    def mark_failed(self, partitions: set[int]) -> None:
        """Report ``partitions`` failed again at the end of the next batch."""
        self._failed |= partitions

    @property
    def problem(self) -> str | None:
        """Why output cannot be delivered now (the producer's problem), or ``None``."""
        return self.producer.problem or self.fences.problem

    def may_resume(self) -> bool:
        """Whether failed partitions may be started over: not until a replaced producer's
        broker has answered a metadata request (asked at most every ``_PROBE_TIMEOUT_S``)."""
        if not self._unproven:
            return True
        now = time.monotonic()
        if now - self._probed_at < _PROBE_TIMEOUT_S:
            return False
        self._probed_at = now
        try:
            self.producer.producer.list_topics(self._cfg.topics.prices, timeout=_PROBE_TIMEOUT_S)
        except KafkaException:
            return False
        self._unproven = False
        return True

    # -- partitions ---------------------------------------------------------------------------

    def track(self, partition: int, arbiter: Arbiter[RawPrice]) -> None:
        """Start reporting ``arbiter``'s duplicates and gaps (from its current counts)."""
        self._reported[partition] = (arbiter.duplicates, arbiter.gaps)

    def forget(self, partition: int) -> None:
        """Stop reporting on ``partition`` (report what is pending first); end its producer."""
        self.fences.discard(partition)
        self._reported.pop(partition, None)
        self._tally.forget_partition(partition)

    # -- producing ----------------------------------------------------------------------------

    def write_markers(
        self,
        partitions: list[int],
        kind: bytes,
        timeout_s: float,
        *,
        terms: Mapping[int, int] | None = None,
        unclean: Collection[int] = (),
    ) -> dict[int, int]:
        """Write a control record of ``kind`` to ``prices[k]`` for each k; return the offsets.

        A control record has no key, an empty value, :data:`CONTROL_HEADER` = ``kind`` and a
        ``marker`` header that starts with this member's :attr:`token` (so its own standby
        tail recognises it); a release also names its ``term`` (from ``terms``), and the
        release of a term that ends before it began says, for the partitions in ``unclean``,
        that it found ``prices[k]`` not released (header ``before`` = ``unclean``). Kinds and
        what they prove: :mod:`pricing_ha.dedupe.standby`. Partitions whose record was not
        acknowledged within ``timeout_s`` are missing from the result.
        """
        offsets: dict[int, int] = {}
        fenced = self.fencing and kind != PROBE
        if fenced and kind == TAKEOVER:
            partitions = sorted(self.fences.fence(partitions, timeout_s))

        def delivered(err: KafkaError | None, msg: Message) -> None:
            partition, offset = msg.partition(), msg.offset()
            if err is None and partition is not None and offset is not None and offset >= 0:
                offsets[partition] = offset

        for partition in partitions:
            producer: Producer | ReplaceableProducer[Producer] = self.producer
            if fenced:
                fence = self.fences.begin(partition)
                if fence is None:
                    continue
                producer = fence
            self._markers += 1
            headers: list[tuple[str, HeaderValue]] = [
                (CONTROL_HEADER, kind),
                ("marker", f"{self.token}:{self._markers}".encode()),
                ("relay", self._member.encode()),
                ("relay_ns", str(time.time_ns()).encode()),
            ]
            if terms is not None and partition in terms:
                headers.append(("term", str(terms[partition]).encode()))
            if partition in unclean:
                headers.append(("before", b"unclean"))
            producer.produce(
                self._cfg.topics.prices,
                key=None,
                value=b"",
                partition=partition,
                headers=headers,
                on_delivery=delivered,
            )
        if not fenced:
            self.producer.flush(timeout_s)
            return offsets
        for partition in self.fences.commit_open():  # every open transaction, side by side
            offsets.pop(partition, None)
        if kind == RELEASE:
            for partition in partitions:
                self.fences.discard(partition)  # this member's term there is over
        return offsets

    def checkpoint(self, partition: int, view: bytes) -> None:
        """Append a checkpoint (a standby view of ``prices[partition]``, see
        :mod:`pricing_ha.dedupe.standby`) after what was emitted there; not waited for."""
        producer: Producer | ReplaceableProducer[Producer] = self.producer
        if self.fencing:
            fence = self.fences.begin(partition)
            if fence is None:
                return
            producer = fence
        self._control(producer, partition, CHECKPOINT, view)
        self.stats.checkpoints += 1

    def _control(
        self,
        producer: Producer | ReplaceableProducer[Producer],
        partition: int,
        kind: bytes,
        value: bytes,
        *extra: tuple[str, HeaderValue],
    ) -> None:
        """Produce a control record of ``kind`` without a marker (a checkpoint, a tick, a
        hand-over announcement)."""
        producer.produce(
            self._cfg.topics.prices,
            key=None,
            value=value,
            partition=partition,
            headers=[
                (CONTROL_HEADER, kind),
                ("relay", self._member.encode()),
                ("relay_ns", str(time.time_ns()).encode()),
                *extra,
            ],
            on_delivery=self._on_delivery,
        )

    def announce(self, partition: int, term: int) -> None:
        """Announce a hand-over of ``term`` on ``prices[partition]`` (without fencing; see
        :mod:`pricing_ha.dedupe.standby`); not waited for. Through the producer that emits
        there, so it lands after everything this member emitted there."""
        self._control(self.producer, partition, HANDOVER, b"", ("term", str(term).encode()))
        self.producer.poll(0)

    def kept(self, partition: int, term: int) -> None:
        """Withdraw the hand-over announcement of ``term`` on ``prices[partition]`` (given
        back, going on under it); not waited for. Through the producer that emits there."""
        self._control(self.producer, partition, KEPT, b"", ("term", str(term).encode()))
        self.producer.poll(0)

    def tick(self, partition: int) -> None:
        """Append a tick (see :mod:`pricing_ha.dedupe.standby`) to ``prices[partition]``; not
        waited for. Never through a fence: it means nothing, so it need not be fenced, and it
        must be readable at once (not held in a transaction)."""
        self._control(self.producer, partition, TICK, b"")
        self.producer.poll(0)

    def emit(self, partition: int, emissions: list[Emission[RawPrice]]) -> bool:
        """Produce ``emissions`` to ``prices[partition]``; False once it is no longer led."""
        if not emissions:
            return True
        topic = self._cfg.topics.prices
        now_ns = time.time_ns()
        relay_ns = str(now_ns).encode()
        member = self._member.encode()
        tally = self._tally
        producer: Producer | ReplaceableProducer[Producer] = self.producer
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
            # already built: without fencing, a process frozen between the check and the call
            # would produce after its successor started (seen once in a loaded CI run: a relay
            # SIGSTOPped inside this loop emitted one record after waking, a duplicate).
            # The window left is a few bytecodes, not the record's construction.
            if not self._leads(partition):
                if send is not None:
                    send.end()
                self.stats.not_leader_skips += 1
                return False
            if self.fencing and producer is self.producer:  # once per call, not per record
                fence = self.fences.begin(partition)
                if fence is None:
                    if send is not None:
                        send.end()
                    return False  # no producer of its own: only a takeover may give it one
                producer = fence
            producer.produce(
                topic,
                key=item.key,
                value=item.value,
                partition=partition,
                headers=headers,
                on_delivery=on_delivery,
            )
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
        what: tuple[str, int, str],
        *,
        parent: Context,
        now: float,
    ) -> bool:
        """Offer one sampled record (instrument, seq, source) and emit, in its process span."""
        instrument, seq, source = what
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
            item = dataclasses.replace(item, trace=child_context(process))
            duplicates = arbiter.duplicates
            emissions = arbiter.offer(instrument, seq, item, source, now)
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
        """Send a malformed raw record to the raw dead-letter topic, with the reason."""
        self.stats.dead_lettered += 1
        self.producer.produce(
            self._cfg.topics.raw_dlq,
            key=msg.key(),
            value=msg.value(),
            partition=partition,
            headers=[
                ("reason", reason.encode()),
                ("source.topic", self._cfg.topics.raw.encode()),
                ("source.partition", str(partition).encode()),
                ("source.offset", str(offset).encode()),
                ("relay", self._member.encode()),
            ],
            on_delivery=self._on_delivery,
        )

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
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        self.fences.commit_open()
        self._tally.flush()
        self.report(arbiters)
        failed = self._take_failed()
        if remaining:
            failed |= set(arbiters)  # not acknowledged in time: nothing may be committed
        return failed

    def poll(self, arbiters: Mapping[int, Arbiter[RawPrice]]) -> set[int]:
        """Serve delivery callbacks and report metrics, without waiting (idle time)."""
        self.producer.poll(0)
        self.fences.commit_open()  # what expired from the reorder windows becomes visible now
        if self._tally.pending:
            self._tally.flush()
        self.report(arbiters)
        return self._take_failed()

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

    def close(self) -> None:
        """Commit open transactions, flush what is still queued."""
        self.fences.close()
        self.producer.close(FLUSH_TIMEOUT_S)
