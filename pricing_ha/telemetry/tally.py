"""Hot-path metrics counted in plain dicts and flushed to the instruments once per batch.

One OpenTelemetry SDK measurement costs several microseconds (about as much as pricing a quote),
so the publisher and the relay never call an instrument per price. A :class:`PriceTally` counts
a batch's prices per partition, notes each instrument seen and the prices' latencies; at the end
of the batch :meth:`PriceTally.flush` adds one measurement per partition to the counter, marks
the instruments fresh (staleness) in one locked update, and records an evenly strided sample of
at most ``max_latency_samples`` latencies. When the load is low (batches of a few prices) every
latency is recorded; under load the histogram's count is a sample, its distribution unbiased.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import Counter

from pricing_ha.telemetry.metrics import PricingMetrics

__all__ = ["DEFAULT_LATENCY_SAMPLES", "PriceTally"]

#: Latency values recorded per batch, at most.
DEFAULT_LATENCY_SAMPLES = 32


class PriceTally:
    """One hot path's metrics for the current batch (see the module docstring).

    Not thread-safe: one worker thread adds, flushes and forgets.

    Args:
        metrics: the registry.
        counter: the counter of prices handled here (e.g. ``metrics.prices_published``).
        stage: the ``stage`` attribute of the latency histograms (``publish``, ``relay``...).
        attributes: extra attributes of the counter (e.g. ``{"group": "p1"}``); ``partition``
            is added per partition.
        max_latency_samples: latency values recorded per batch, at most.
        clock: wall time in seconds (staleness), injectable for tests.
    """

    __slots__ = (
        "_attrs",
        "_base",
        "_batch",
        "_by_partition",
        "_clock",
        "_counter",
        "_counts",
        "_hops",
        "_latencies",
        "_max",
        "_metrics",
        "_per_instrument",
        "_stage",
    )

    def __init__(
        self,
        metrics: PricingMetrics,
        counter: Counter,
        *,
        stage: str,
        attributes: Mapping[str, str] | None = None,
        max_latency_samples: int = DEFAULT_LATENCY_SAMPLES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Start with an empty batch."""
        if max_latency_samples < 1:
            raise ValueError(f"max_latency_samples must be >= 1, got {max_latency_samples}")
        self._metrics = metrics
        self._counter = counter
        self._stage = {"stage": stage}
        self._base = dict(attributes or {})
        self._attrs: dict[int, dict[str, str]] = {}
        self._max = max_latency_samples
        self._clock = clock
        self._counts: dict[int, int] = {}
        # Instruments are noted only for the opt-in per-instrument staleness: otherwise a flood
        # of new names would grow _by_partition without limit.
        self._per_instrument = metrics.per_instrument
        self._batch: dict[str, int] = {}  # instrument -> partition, this batch
        self._by_partition: dict[int, set[str]] = {}  # every instrument seen, per partition
        self._latencies: list[float] = []
        self._hops: list[float] = []

    def add(self, partition: int, instrument: str, latency_s: float, hop_s: float | None) -> None:
        """Count one price of ``instrument`` on ``partition``, with its latencies (seconds)."""
        counts = self._counts
        counts[partition] = counts.get(partition, 0) + 1
        if self._per_instrument:
            self._batch[instrument] = partition
        self._latencies.append(latency_s)
        if hop_s is not None:
            self._hops.append(hop_s)

    def declare(self, partitions: Iterable[int]) -> None:
        """Create the counter's series of ``partitions`` at zero, and this stage's latency
        histograms empty.

        /metrics then shows them from start-up, before the first price, so a dashboard or an
        alert on their rate sees 0 instead of no data.
        """
        for partition in partitions:
            self._counter.add(0, self._attributes(partition))
        self._metrics.declare_latency(self._stage["stage"])

    def _attributes(self, partition: int) -> dict[str, str]:
        attrs = self._attrs.get(partition)
        if attrs is None:
            attrs = self._attrs[partition] = {**self._base, "partition": str(partition)}
        return attrs

    @property
    def pending(self) -> int:
        """Prices counted since the last flush."""
        return sum(self._counts.values())

    def flush(self, at_wall: float | None = None) -> None:
        """Report the batch to the instruments and start a new one."""
        if not self._counts:
            return
        for partition, n in self._counts.items():
            self._counter.add(n, self._attributes(partition))
        for values, histogram in (
            (self._latencies, self._metrics.latency),
            (self._hops, self._metrics.hop_latency),
        ):
            for v in _strided(values, self._max):
                histogram.record(max(0.0, v), self._stage)
        at = self._clock() if at_wall is None else at_wall
        for instrument, partition in self._batch.items():
            self._by_partition.setdefault(partition, set()).add(instrument)
        self._metrics.mark_partitions_fresh(self._counts, at)
        if self._batch:
            self._metrics.mark_fresh_many(self._batch, at)
        self._counts = {}
        self._batch = {}
        self._latencies = []
        self._hops = []

    def forget_partition(self, partition: int) -> None:
        """Stop reporting staleness for ``partition`` and its instruments (no longer worked on)."""
        self._metrics.forget_partition(partition)
        for instrument in self._by_partition.pop(partition, ()):
            self._metrics.forget_instrument(instrument)


def _strided(values: list[float], limit: int) -> list[float]:
    """At most ``limit`` of ``values``, evenly spread over them."""
    if len(values) <= limit:
        return values
    step = math.ceil(len(values) / limit)
    return values[step // 2 :: step]
