"""Writing the relay's control records to ``prices``: markers, checkpoints, ticks.

What each kind of control record says, and the view of a partition they fold into, is
:mod:`.control`; this module writes them, through the member's producers
(:mod:`.output_producers`). :class:`ControlWriter` writes

* **markers**, waited for (:meth:`ControlWriter.write_markers`): probes (:mod:`.grace_period`)
  and takeover markers (:mod:`.succession`), and release markers (the worker, when it lets a
  partition go). Each carries a ``marker`` header that starts with this member's
  :attr:`~ControlWriter.token`, so its own standby tail (:mod:`.standby`) recognises it and
  captures the partition's state just before it. A takeover marker is written only by a
  producer whose ``init_transactions`` fenced the previous owner, and a release ends the
  member's transactional producer for the partition; a probe goes through the member's one
  idempotent producer (it asks, and must not fence);
* records not waited for, without a marker: checkpoints (an owner's, about every second on
  each partition it emits on, in the transaction that emits its prices, so they follow them:
  :meth:`ControlWriter.write_checkpoints`), and ticks (:mod:`.handover`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Collection, Mapping

from confluent_kafka import KafkaError, Message, Producer

from pricing_ha.config import AppConfig, message_max_bytes
from pricing_ha.dedupe.control import (
    CHECKPOINT,
    PROBE,
    RELEASE,
    TAKEOVER,
    TICK,
)
from pricing_ha.dedupe.fences import FENCE_ERRORS
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.kafka.headers import CONTROL_HEADER, HeaderValue
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.telemetry.ratelimited import RateLimitedWarnings

__all__ = ["ControlWriter"]

# An owner appends a checkpoint of its standby view to each partition it emits on about this
# often (when prices arrived since): a member joining reads about this much of prices[k].
_CHECKPOINT_EVERY_S = 1.0
# Room left in a record for a checkpoint's headers and the record's own overhead.
_RECORD_OVERHEAD_BYTES = 1024

log = logging.getLogger("pricing_ha.relay")


class ControlWriter:
    """The relay's writer of control records (see the module docstring). Worker thread only.

    Args:
        cfg: the configuration (the ``prices`` topic).
        member: this relay member's name.
        producers: the member's producers, which the control records go through.
        stats: the member's counters (checkpoints).
    """

    def __init__(
        self, cfg: AppConfig, member: str, producers: OutputProducers, *, stats: RelayStats
    ) -> None:
        """Pick this member's token; nothing is written yet."""
        self._topic = cfg.topics.prices
        self._member = member
        self._producers = producers
        self._stats = stats
        #: Starts the ``marker`` header of this member's control records (one per process).
        self.token = f"{member}/{uuid.uuid4().hex[:12]}"
        self._markers = 0
        self._next_checkpoint = 0.0
        self._checkpointed: dict[int, int] = {}  # partition -> last price the last one covered
        #: The largest checkpoint value written: a larger record would fail to produce.
        self.max_checkpoint_bytes = message_max_bytes(cfg.broker) - _RECORD_OVERHEAD_BYTES
        self._warnings = RateLimitedWarnings(log, cfg.limits.warn_interval_ms / 1000)

    def write_markers(
        self,
        partitions: list[int],
        kind: bytes,
        timeout_s: float,
        *,
        terms: Mapping[int, int] | None = None,
        unclean: Collection[int] = (),
        below: Mapping[int, tuple[int, float]] | None = None,
    ) -> dict[int, int]:
        """Write a control record of ``kind`` to ``prices[k]`` for each k; return the offsets.

        A control record has no key, an empty value, :data:`CONTROL_HEADER` = ``kind`` and a
        ``marker`` header that starts with this member's :attr:`token` (so its own standby
        tail recognises it); a release also names its ``term`` (from ``terms``), and the
        release of a term that ends before it began says, for the partitions in ``unclean``,
        that it found ``prices[k]`` not released (header ``before`` = ``unclean``) and, for the
        partitions in ``below``, which term (and its marker's timestamp) lay below the term it
        ends, so that readers take that term as the latest again. Kinds and
        what they prove: :mod:`pricing_ha.dedupe.control`. Partitions whose record was not
        acknowledged within ``timeout_s`` are missing from the result.

        A probe goes through the member's idempotent producer; every other kind through the
        partition's transactional producer, which a takeover marker first gives it
        (``init_transactions``: the previous owner is fenced), and which a release ends.
        """
        offsets: dict[int, int] = {}
        fences = self._producers.fences
        fenced = kind != PROBE
        if fenced and kind == TAKEOVER:
            partitions = sorted(fences.fence(partitions, timeout_s))

        def delivered(err: KafkaError | None, msg: Message) -> None:
            partition, offset = msg.partition(), msg.offset()
            if err is None and partition is not None and offset is not None and offset >= 0:
                offsets[partition] = offset

        for partition in partitions:
            producer: Producer | ReplaceableProducer[Producer] = self._producers.producer
            if fenced:
                fence = fences.begin(partition)
                if fence is None:
                    continue
                producer = fence
            headers = self._marker_headers(kind, partition, terms, unclean, below)
            try:
                producer.produce(
                    self._topic,
                    key=None,
                    value=b"",
                    partition=partition,
                    headers=headers,
                    on_delivery=delivered,
                )
            except FENCE_ERRORS as exc:  # fenced meanwhile: its output failed (.output)
                if not fenced:
                    raise
                fences.lose(partition, f"a control record was refused: {exc}")
        if not fenced:
            self._producers.producer.flush(timeout_s)
            return offsets
        for partition in fences.commit_open():  # every open transaction, side by side
            offsets.pop(partition, None)
        if kind == RELEASE:
            for partition in partitions:
                fences.discard(partition)  # this member's term there is over
        return offsets

    def prepare_takeovers(self, partitions: Collection[int]) -> None:
        """Create the transactional producers of ``partitions`` ahead of their takeover
        (:meth:`.fences.Fences.prepare`); those not taken over are let go by
        :meth:`forget_prepared`."""
        self._producers.fences.prepare(partitions)

    def forget_prepared(self, keep: Collection[int]) -> None:
        """Let go of the producers prepared for partitions not in ``keep``."""
        self._producers.fences.unprepare(keep)

    def _marker_headers(
        self,
        kind: bytes,
        partition: int,
        terms: Mapping[int, int] | None,
        unclean: Collection[int],
        below: Mapping[int, tuple[int, float]] | None,
    ) -> list[tuple[str, HeaderValue]]:
        """The headers of one marker (see :meth:`write_markers`)."""
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
            if below is not None and partition in below:
                term_below, wall_below = below[partition]
                headers.append(("below", str(term_below).encode()))
                headers.append(("below_wall", repr(wall_below).encode()))
        return headers

    def write_checkpoints(
        self,
        now: float,
        terms: Collection[int],
        may_emit: Callable[[int], bool],
        views: Callable[[int, int], tuple[bytes, int] | None],
    ) -> None:
        """A checkpoint on each partition this member emits on, if prices came since the last,
        once ``_CHECKPOINT_EVERY_S`` has passed since the last round (``now``, monotonic).

        ``terms`` are the partitions this member holds a term on, ``may_emit`` says whether it
        may emit on one now, ``views`` is :meth:`.standby.StandbyTail.checkpoint`. Only an owner
        writes them (in its transaction), so they follow its prices and cost one
        small record per partition per interval.
        """
        if now < self._next_checkpoint:
            return
        self._next_checkpoint = now + _CHECKPOINT_EVERY_S
        for partition in list(self._checkpointed):
            if partition not in terms:
                del self._checkpointed[partition]
        for partition in sorted(terms):
            if not may_emit(partition):
                continue
            got = views(partition, self._checkpointed.get(partition, -1))
            if got is not None:
                view, last_data = got
                self.checkpoint(partition, view)
                self._checkpointed[partition] = last_data

    def checkpoint(self, partition: int, view: bytes) -> None:
        """Append a checkpoint (a standby view of ``prices[partition]``, see
        :mod:`pricing_ha.dedupe.standby`) after what was emitted there; not waited for.

        A view larger than :attr:`max_checkpoint_bytes` is not written (counted, warned about,
        rate-limited): its produce would fail. Nothing is lost: a member that joins starts
        from the partition's previous checkpoint, or its start, and reads on from there.
        ``limits.max_instruments_per_partition`` is checked against the message size when the
        configuration loads, so only instrument names far longer than usual get here.
        """
        if len(view) > self.max_checkpoint_bytes:
            self._stats.checkpoints_skipped += 1
            self._warnings.warn(
                "checkpoint too large",
                "checkpoint of prices[%d] not written: %d bytes, more than %d "
                "(broker.librdkafka message.max.bytes less the record's overhead)",
                partition,
                len(view),
                self.max_checkpoint_bytes,
            )
            return
        fences = self._producers.fences
        fence = fences.begin(partition)
        if fence is None:
            return
        try:
            self._control(fence, partition, CHECKPOINT, view)
        except FENCE_ERRORS as exc:  # fenced meanwhile: its output failed (.output)
            fences.lose(partition, f"a checkpoint was refused: {exc}")
            return
        self._stats.checkpoints += 1

    def _control(
        self,
        producer: Producer | ReplaceableProducer[Producer],
        partition: int,
        kind: bytes,
        value: bytes,
        *extra: tuple[str, HeaderValue],
    ) -> None:
        """Produce a control record of ``kind`` without a marker (a checkpoint, a tick)."""
        producer.produce(
            self._topic,
            key=None,
            value=value,
            partition=partition,
            headers=[
                (CONTROL_HEADER, kind),
                ("relay", self._member.encode()),
                ("relay_ns", str(time.time_ns()).encode()),
                *extra,
            ],
            on_delivery=self._producers.on_delivery,
        )

    def tick(self, partition: int) -> None:
        """Append a tick (see :mod:`pricing_ha.dedupe.standby`) to ``prices[partition]``; not
        waited for. Never through a fence: it means nothing, so it need not be fenced, and it
        must be readable at once (not held in a transaction)."""
        producer = self._producers.producer
        self._control(producer, partition, TICK, b"")
        producer.poll(0)
