"""``/metrics``: the OpenTelemetry SDK's metrics in Prometheus text format 0.0.4.

The translation is OpenTelemetry's own Prometheus exporter (``opentelemetry-exporter-prometheus``:
names sanitised, units appended — ``pricing_ha.price.latency`` in ``s`` becomes
``pricing_ha_price_latency_seconds`` — monotonic sums as ``..._total`` counters, histograms as
cumulative ``_bucket{le=...}``, ``_sum`` and ``_count``, the resource as ``target_info``), and the
exposition is ``prometheus_client``'s. Each :class:`PrometheusExposition` has registries of its
own, never the process-global one, so that several telemetries (tests, the demo) do not collide.

One thing is added on top: an OpenTelemetry histogram has no "zero" observation, so a latency
stage declared at start-up (:meth:`PricingMetrics.declare_latency
<pricing_ha.telemetry.metrics.PricingMetrics.declare_latency>`) is written as an empty histogram
(every bucket, the sum and the count at 0) until its first measurement, by
:class:`_DeclaredHistograms`, which wraps the exporter's collector.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from pricing_ha.telemetry.metrics import EmptyHistogram

__all__ = ["CONTENT_TYPE", "PrometheusExposition", "prometheus_name"]

#: The Content-Type of the exposition format.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# The exporter's unit mapping for the units our histograms use (the rest need no suffix).
_UNIT_SUFFIX = {"s": "seconds", "ms": "milliseconds", "By": "bytes"}


def prometheus_name(name: str, unit: str) -> tuple[str, str]:
    """The Prometheus base name and unit suffix the exporter gives instrument ``name``."""
    return name.replace(".", "_").replace("-", "_"), _UNIT_SUFFIX.get(unit, "")


def _le(bound: float) -> str:
    text: str = floatToGoString(bound)  # type: ignore[no-untyped-call]  # untyped upstream
    return text


class _DeclaredHistograms(Collector):
    """The exporter's families, plus an empty histogram for each declared, unmeasured series."""

    def __init__(
        self, source: CollectorRegistry, declared: Callable[[], Iterable[EmptyHistogram]]
    ) -> None:
        self._source = source
        self.declared = declared

    def collect(self) -> Iterator[Metric]:
        """Yield every family once, empty declared histograms filled in."""
        families = {family.name: family for family in self._source.collect()}
        for empty in self.declared():
            base, unit = prometheus_name(empty.name, empty.unit)
            name = f"{base}_{unit}" if unit else base
            family = families.get(name)
            labels = dict(empty.attributes)
            if family is None:
                family = HistogramMetricFamily(
                    base, empty.description, labels=list(labels), unit=unit
                )
                families[name] = family
            elif any(s.name == f"{name}_count" and s.labels == labels for s in family.samples):
                continue
            # The same `le` text the exporter's families get from prometheus_client.
            bounds = [*(_le(b) for b in empty.bounds), "+Inf"]
            for le in bounds:
                family.add_sample(f"{name}_bucket", {**labels, "le": le}, 0.0)
            family.add_sample(f"{name}_count", labels, 0.0)
            family.add_sample(f"{name}_sum", labels, 0.0)
        yield from families.values()


class PrometheusExposition:
    """A meter provider's metrics as Prometheus text: add :attr:`reader` to the provider.

    Args:
        target_info: also write the resource as ``target_info``.

    Attributes:
        reader: the metric reader to pass to the ``MeterProvider``.
        registry: the ``prometheus_client`` registry ``/metrics`` renders.
    """

    def __init__(self, *, target_info: bool = True) -> None:
        """Create the reader and the registries."""
        exporter_registry = CollectorRegistry(auto_describe=False)
        # One instrumentation scope: otel_scope_* labels on every series would only add noise.
        self.reader = PrometheusMetricReader(
            disable_target_info=not target_info,
            scope_info_enabled=False,
            registry=exporter_registry,
        )
        self._declared = _DeclaredHistograms(exporter_registry, lambda: ())
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self._declared)
        # The exporter hands each collection to the next scrape through a shared queue:
        # concurrent scrapes must not take each other's data.
        self._lock = threading.Lock()

    def declare(self, empty_histograms: Callable[[], Iterable[EmptyHistogram]]) -> None:
        """Write each of ``empty_histograms()`` as an empty histogram until it is measured."""
        self._declared.declared = empty_histograms

    def text(self) -> str:
        """The current metrics in Prometheus text format 0.0.4."""
        with self._lock:
            return generate_latest(self.registry).decode()
