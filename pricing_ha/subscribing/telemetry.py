"""A subscriber's spans and metrics: where a sampled price's trace ends.

:class:`SubscriberTelemetry` is what :class:`~pricing_ha.subscribing.subscriber.Subscriber` calls:

* a record whose ``traceparent`` is sampled gets a ``process {topic}`` span (CONSUMER), child
  of the relay's ``send prices`` span (or, in direct mode, of the publisher's ``send
  prices.raw``), with ``pricing_ha.arbitration`` = ``delivered``, ``duplicate`` or ``held``;
* in direct mode each switch of publisher is a ``subscriber.switch {instrument}`` span
  (:func:`pricing_ha.dedupe.failover_spans.trace_switch`), always recorded;
* prices delivered, latencies (from the source time; the hop from the publisher in direct
  mode), staleness, duplicates dropped and gaps are counted, and flushed once per poll.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.trace import Span

from pricing_ha.dedupe.arbitration import Emission
from pricing_ha.dedupe.failover_spans import trace_switch
from pricing_ha.telemetry import Telemetry
from pricing_ha.telemetry.pricepath import traceparent_context
from pricing_ha.telemetry.tally import PriceTally

__all__ = ["SubscriberTelemetry"]


class SubscriberTelemetry:
    """Spans and metrics of one subscriber (see the module docstring).

    Args:
        telemetry: where they go (``None``: nowhere).
        topic: the topic read (``prices``, or ``prices.raw`` in direct mode).
        group_id: the consumer's group id (never joined; names the consumer in spans).
        direct: whether the subscriber arbitrates the publishers' copies itself.
    """

    def __init__(
        self, telemetry: Telemetry | None, *, topic: str, group_id: str, direct: bool
    ) -> None:
        """Prepare the instruments."""
        tel = telemetry if telemetry is not None else Telemetry.noop()
        self._tracer = tel.tracer()
        self._path = tel.price_path()
        self._metrics = tel.metrics
        self._topic = topic
        self._group_id = group_id
        self._direct = direct
        self._tally = PriceTally(tel.metrics, tel.metrics.prices_delivered, stage="subscriber")
        self._dropped: dict[int, int] = {}  # partition -> duplicates dropped since the flush
        self._gaps: dict[int, int] = {}  # partition -> seqs declared missing since the flush

    def declare(self, partitions: Iterable[int]) -> None:
        """Create the delivered, duplicates and gaps series of ``partitions`` at zero."""
        partitions = list(partitions)  # read twice
        self._tally.declare(partitions)
        self._metrics.declare_defects("subscriber", partitions)

    def start_process(
        self,
        traceparent: str | None,
        *,
        partition: int,
        offset: int,
        instrument: str,
        seq: int,
        source: str,
    ) -> Span | None:
        """The ``process`` span of a sampled record, else ``None`` (no span object at all)."""
        parent = traceparent_context(traceparent) if traceparent else None
        if parent is None:
            return None
        return self._path.start_process(
            self._topic,
            parent,
            partition=partition,
            offset=offset,
            key=instrument,
            consumer_group=self._group_id,
            attributes={"pricing_ha.seq": seq, "pricing_ha.source": source},
        )

    def dropped(self, partition: int) -> None:
        """A copy read from ``partition`` was dropped as a duplicate."""
        self._dropped[partition] = self._dropped.get(partition, 0) + 1

    def delivered(
        self, e: Emission[Any], *, partition: int, source_ns: int, publish_ns: int | None, wall: int
    ) -> None:
        """Count one delivery at wall time ``wall`` (ns); trace it if it is a direct-mode switch.

        In relay mode a change of publisher in the relay's output is the relay's switch, which
        the relay has traced already.
        """
        if e.gap_before:
            self._gaps[partition] = self._gaps.get(partition, 0) + e.gap_before
        if e.switched_from is not None and self._direct:  # in relay mode: the relay's switch
            trace_switch(
                self._tracer,
                e,
                stage="subscriber",
                partition=partition,
                observer=self._group_id,
                at_ns=wall,
            )
        # The previous hop is the publisher's only in direct mode (in relay mode, the relay's).
        hop = (wall - publish_ns) / 1e9 if self._direct and publish_ns else None
        self._tally.add(partition, e.instrument, (wall - source_ns) / 1e9, hop)

    def flush(self) -> None:
        """Report what was counted since the last flush (one measurement per partition)."""
        if self._tally.pending:
            self._tally.flush()
        for counts, counter in (
            (self._dropped, self._metrics.duplicates_dropped),
            (self._gaps, self._metrics.gaps),
        ):
            for partition, n in counts.items():
                counter.add(n, {"stage": "subscriber", "partition": str(partition)})
            counts.clear()
