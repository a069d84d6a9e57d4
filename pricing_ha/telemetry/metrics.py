"""The application's metric instruments, in one registry other modules call.

Counters are plain OpenTelemetry instruments (``metrics.prices_published.add(1, {...})``); the two
gauges are observed from state this registry keeps (leadership held, per-instrument staleness),
so callers only report what happened. Attribute keys are short and become Prometheus labels:

=========================================  ==========  ===========================================
instrument                                 kind        attributes
=========================================  ==========  ===========================================
``pricing_ha.leadership.held``             gauge 0/1   group, member, partition
``pricing_ha.leadership.transitions``      counter     group, member, partition, kind
``pricing_ha.prices.published``            counter     group, partition
``pricing_ha.prices.relayed``              counter     partition
``pricing_ha.prices.delivered``            counter     partition
``pricing_ha.duplicates.dropped``          counter     stage (``relay``/``subscriber``), partition
``pricing_ha.seq.gaps``                    counter     stage, partition
``pricing_ha.partition.staleness``         gauge (s)   partition
``pricing_ha.instrument.staleness``        gauge (s)   instrument (opt-in: ``per_instrument``)
``pricing_ha.price.latency``               histogram   stage (end-to-end: source time to here, s)
``pricing_ha.price.hop_latency``           histogram   stage (the previous stage's produce to here)
``pricing_ha.neli.heartbeats.rejected``    counter     group, reason (NELI records refused)
``pricing_ha.relay.takeovers``             counter     (none): partitions this relay member took
                                                       over (established, any reason)
``pricing_ha.relay.suspicions``            counter     (none): takeovers it began on suspicion
                                                       of a silent owner (wrong ones included)
=========================================  ==========  ===========================================

librdkafka's statistics (consumer lag, producer queues, broker round trips) are separate:
:mod:`pricing_ha.telemetry.kafka_stats`.

Every price counter, and the duplicates and gaps counters, is created at zero for every partition
when its role starts (:meth:`PriceTally.declare <pricing_ha.telemetry.tally.PriceTally.declare>`,
:meth:`PricingMetrics.declare_defects`), so /metrics shows them before the first price. The
role's latency histograms are declared then too (:meth:`PricingMetrics.declare_latency`): an
OpenTelemetry histogram has no "zero" observation, so /metrics writes a declared stage without
one as an empty histogram (every bucket, the sum and the count at 0) until its first
measurement. The staleness gauge alone appears with its first price: a 0 would say "fresh"
about an instrument nothing has been heard of.

The hot paths do not call these instruments per price (one measurement costs about as much as
pricing a quote): they count in a :class:`~pricing_ha.telemetry.tally.PriceTally` and flush it
once per batch.

Partitions are attribute *strings*, as in the messaging semantic conventions.

No attribute of the default export is per instrument: a flood of new instrument names would
grow the series (and the state behind them) without limit. Staleness is reported per
partition (seconds since its last price seen here); the per-instrument gauge is opt-in
(``telemetry.per_instrument_metrics``), for a known, bounded set of instruments.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from neli import LeadershipEvent

__all__ = ["LATENCY_BUCKETS_S", "EmptyHistogram", "PricingMetrics"]

#: Histogram bucket bounds for end-to-end latency, in seconds.
LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


@dataclass(frozen=True)
class EmptyHistogram:
    """A declared histogram series with no measurement yet (see the module docstring)."""

    name: str
    unit: str
    description: str
    bounds: tuple[float, ...]
    attributes: tuple[tuple[str, str], ...]


_HISTOGRAMS = (
    (
        "pricing_ha.price.latency",
        "End-to-end latency from the quote's source time, by stage",
    ),
    (
        "pricing_ha.price.hop_latency",
        "Latency of the last hop: the previous stage's produce to here, by stage",
    ),
)


class PricingMetrics:
    """Every metric instrument of pricing-ha, created on one meter.

    Thread-safe: counters may be updated from worker threads, and the gauges' state is guarded.

    Args:
        meter: where the instruments live (a no-op meter when telemetry is disabled).
        clock: wall time in seconds, for staleness (tests inject one).
        per_instrument: also keep and export staleness per instrument (see the module
            docstring).
    """

    def __init__(
        self,
        meter: Meter,
        *,
        clock: Callable[[], float] = time.time,
        per_instrument: bool = False,
    ) -> None:
        """Create the instruments."""
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str, int], bool] = {}
        #: Whether staleness is kept per instrument too (:meth:`mark_fresh_many` is a no-op
        #: otherwise).
        self.per_instrument = per_instrument
        self._fresh: dict[str, float] = {}
        self._fresh_partitions: dict[str, float] = {}
        self._rejections: dict[str, Callable[[], Mapping[str, int]]] = {}
        self._takeovers: Callable[[], tuple[int, int]] | None = None
        self.leadership_transitions = meter.create_counter(
            "pricing_ha.leadership.transitions",
            unit="{transition}",
            description="Leadership transitions of this member, by kind",
        )
        self.prices_published = meter.create_counter(
            "pricing_ha.prices.published",
            unit="{price}",
            description="Prices produced to prices.raw by this publisher member",
        )
        self.prices_relayed = meter.create_counter(
            "pricing_ha.prices.relayed",
            unit="{price}",
            description="Prices emitted to the deduplicated topic by this relay member",
        )
        self.prices_delivered = meter.create_counter(
            "pricing_ha.prices.delivered",
            unit="{price}",
            description="Prices delivered to this subscriber",
        )
        self.duplicates_dropped = meter.create_counter(
            "pricing_ha.duplicates.dropped",
            unit="{price}",
            description="Duplicate prices dropped, by stage",
        )
        self.gaps = meter.create_counter(
            "pricing_ha.seq.gaps",
            unit="{gap}",
            description="Missing sequence numbers declared, by stage",
        )
        self.latency, self.hop_latency = (
            meter.create_histogram(
                name,
                unit="s",
                description=text,
                explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S,
            )
            for name, text in _HISTOGRAMS
        )
        self._latency_stages: set[str] = set()
        meter.create_observable_gauge(
            "pricing_ha.leadership.held",
            callbacks=[self._observe_held],
            unit="1",
            description="1 while this member leads the partition, else 0",
        )
        meter.create_observable_counter(
            "pricing_ha.neli.heartbeats.rejected",
            callbacks=[self._observe_rejected],
            unit="{record}",
            description="Records read on the NELI topic and refused (not heartbeats, or lying)",
        )
        meter.create_observable_counter(
            "pricing_ha.relay.takeovers",
            callbacks=[lambda _o: self._observe_takeovers(0)],
            unit="{partition}",
            description="Partitions this relay member took over (established, any reason)",
        )
        meter.create_observable_counter(
            "pricing_ha.relay.suspicions",
            callbacks=[lambda _o: self._observe_takeovers(1)],
            unit="{partition}",
            description="Takeovers this relay member began on suspicion of a silent owner",
        )
        meter.create_observable_gauge(
            "pricing_ha.partition.staleness",
            callbacks=[self._observe_partition_staleness],
            unit="s",
            description="Seconds since the last price of the partition was seen here",
        )
        if per_instrument:
            meter.create_observable_gauge(
                "pricing_ha.instrument.staleness",
                callbacks=[self._observe_staleness],
                unit="s",
                description="Seconds since the last price of the instrument was seen here",
            )

    def declare_defects(self, stage: str, partitions: Iterable[int]) -> None:
        """Create the duplicates-dropped and gaps series of ``stage`` at zero for ``partitions``.

        Counters otherwise appear only with their first increment; a series present at 0 from
        start-up lets alerts on them work (and tell "none yet" from "not measured").
        """
        for partition in partitions:
            attrs = {"stage": stage, "partition": str(partition)}
            self.duplicates_dropped.add(0, attrs)
            self.gaps.add(0, attrs)

    def declare_latency(self, stage: str) -> None:
        """Show ``stage``'s latency histograms on /metrics from now on, empty until measured."""
        with self._lock:
            self._latency_stages.add(stage)

    def empty_histograms(self) -> list[EmptyHistogram]:
        """The declared latency series, for /metrics to write where no measurement exists."""
        with self._lock:
            stages = sorted(self._latency_stages)
        return [
            EmptyHistogram(name, "s", text, LATENCY_BUCKETS_S, (("stage", stage),))
            for name, text in _HISTOGRAMS
            for stage in stages
        ]

    # -- leadership ---------------------------------------------------------------------------

    def set_leadership(self, group: str, member: str, partition: int, held: bool) -> None:
        """Record whether ``member`` of ``group`` leads ``partition`` now."""
        with self._lock:
            self._held[(group, member, partition)] = held

    def record_leadership(self, event: LeadershipEvent) -> None:
        """A NELI barrier handler: counts the transition and updates the held gauge."""
        self.leadership_transitions.add(
            1,
            {
                "group": event.group,
                "member": event.member_name,
                "partition": str(event.partition),
                "kind": event.kind.value,
            },
        )
        self.set_leadership(event.group, event.member_name, event.partition, event.kind.gains)

    def watch_rejections(self, group: str, counts: Callable[[], Mapping[str, int]]) -> None:
        """Report ``counts()`` (refused NELI records per reason, e.g.
        :attr:`neli.Neli.heartbeats_rejected`) as ``pricing_ha.neli.heartbeats.rejected``."""
        with self._lock:
            self._rejections[group] = counts

    def watch_takeovers(self, counts: Callable[[], tuple[int, int]]) -> None:
        """Report ``counts()`` (a relay member's takeovers established, and those begun on
        suspicion) as ``pricing_ha.relay.takeovers`` and ``...suspicions``, from 0."""
        with self._lock:
            self._takeovers = counts

    def _observe_takeovers(self, which: int) -> Iterable[Observation]:
        with self._lock:
            counts = self._takeovers
        return [] if counts is None else [Observation(counts()[which])]

    def _observe_rejected(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            sources = list(self._rejections.items())
        return [
            Observation(n, {"group": group, "reason": reason})
            for group, counts in sources
            for reason, n in counts().items()
        ]

    def _observe_held(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            held = list(self._held.items())
        return [
            Observation(int(v), {"group": g, "member": m, "partition": str(p)})
            for (g, m, p), v in held
        ]

    # -- staleness ----------------------------------------------------------------------------

    def mark_partitions_fresh(
        self, partitions: Iterable[int], at_wall: float | None = None
    ) -> None:
        """Prices of every one of ``partitions`` were seen (at ``at_wall``, default now)."""
        at = self._clock() if at_wall is None else at_wall
        with self._lock:
            fresh = self._fresh_partitions
            for partition in partitions:
                key = str(partition)
                if at > fresh.get(key, float("-inf")):
                    fresh[key] = at

    def forget_partition(self, partition: int) -> None:
        """Stop reporting staleness for ``partition`` (e.g. it moved away)."""
        with self._lock:
            self._fresh_partitions.pop(str(partition), None)

    def _observe_partition_staleness(self, _options: CallbackOptions) -> Iterable[Observation]:
        now = self._clock()
        with self._lock:
            fresh = list(self._fresh_partitions.items())
        return [Observation(max(0.0, now - at), {"partition": p}) for p, at in fresh]

    def mark_fresh(self, instrument: str, at_wall: float | None = None) -> None:
        """A price of ``instrument`` was seen (at ``at_wall``, default now); a no-op unless
        :attr:`per_instrument`."""
        if not self.per_instrument:
            return
        at = self._clock() if at_wall is None else at_wall
        with self._lock:
            if at > self._fresh.get(instrument, float("-inf")):
                self._fresh[instrument] = at

    def mark_fresh_many(self, instruments: Iterable[str], at_wall: float | None = None) -> None:
        """Prices of every one of ``instruments`` were seen (at ``at_wall``, default now); a
        no-op unless :attr:`per_instrument`."""
        if not self.per_instrument:
            return
        at = self._clock() if at_wall is None else at_wall
        with self._lock:
            fresh = self._fresh
            for instrument in instruments:
                if at > fresh.get(instrument, float("-inf")):
                    fresh[instrument] = at

    def forget_instrument(self, instrument: str) -> None:
        """Stop reporting staleness for ``instrument`` (e.g. its partition moved away)."""
        with self._lock:
            self._fresh.pop(instrument, None)

    def _observe_staleness(self, _options: CallbackOptions) -> Iterable[Observation]:
        now = self._clock()
        with self._lock:
            fresh = list(self._fresh.items())
        return [Observation(max(0.0, now - at), {"instrument": i}) for i, at in fresh]
