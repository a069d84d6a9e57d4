"""Where telemetry is set up: the application's OpenTelemetry SDK (resource, exporters, sampling).

:func:`setup_telemetry` is called once per process by its entry point. It builds:

* a **resource**: ``service.name=pricing-ha``, ``service.version``, ``service.instance.id``
  (``role/group/az/member``), ``cloud.availability_zone`` (from ``[telemetry] az``, passed in by
  the deployment) and ``process.pid``, each overridden by ``OTEL_RESOURCE_ATTRIBUTES`` and
  ``OTEL_SERVICE_NAME`` as the specification says (:mod:`pricing_ha.telemetry.otel_env`);
* a **tracer provider**, exporting over OTLP/HTTP when an endpoint is configured
  (``[telemetry] otlp_endpoint``, else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_ENDPOINT``), otherwise to a JSON-lines file per process in
  ``[telemetry] traces_dir`` (:mod:`pricing_ha.telemetry.jsonl`). Price-path spans (producer and
  consumer spans) are sampled at ``[telemetry] price_sample_ratio``, following the parent's
  decision carried in the message headers; everything else (leadership terms and transitions,
  relay switches) is always recorded;
* a **meter provider** with the instruments of
  :class:`~pricing_ha.telemetry.metrics.PricingMetrics`, read on demand for ``/metrics``
  (OpenTelemetry's Prometheus exporter: :mod:`pricing_ha.telemetry.prometheus`) and also
  pushed over OTLP when an endpoint is configured.

``OTEL_SDK_DISABLED=true`` turns all of it into no-ops (``/metrics`` is then empty).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

import pricing_ha
from neli import LeadershipTracing, Neli, trace_leadership
from pricing_ha.config import AppConfig
from pricing_ha.telemetry.jsonl import JsonLinesSpanExporter
from pricing_ha.telemetry.kafka_stats import KafkaStats
from pricing_ha.telemetry.metrics import PricingMetrics
from pricing_ha.telemetry.otel_env import check_otlp_protocols, env_resource_attributes
from pricing_ha.telemetry.pricepath import CALLER_SAMPLED_KEY, PricePath
from pricing_ha.telemetry.prometheus import PrometheusExposition

__all__ = ["SERVICE_NAME", "PricePathSampler", "Telemetry", "setup_telemetry"]

log = logging.getLogger("pricing_ha.telemetry")

SERVICE_NAME = "pricing-ha"
_INSTRUMENTATION = "pricing_ha"
# Leadership spans are rare and precious: export them within half a second, so that a process
# killed right after a transition has already written it.
_FILE_EXPORT_DELAY_MS = 500
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


class PricePathSampler(Sampler):
    """Samples price-path spans at a ratio and every other span always.

    Producer and consumer spans (``send {topic}``, ``process {topic}``) are the price path: a
    root one is sampled with probability ``ratio`` (by trace id, so every process agrees), a
    child follows its parent (the context arrives in the Kafka headers). A root whose caller
    has already drawn the ratio (:class:`~pricing_ha.telemetry.pricepath.PricePath` does, so
    that unsampled prices cost no span object) says so in its parent context
    (:data:`~pricing_ha.telemetry.pricepath.CALLER_SAMPLED_KEY`) and is recorded. Other spans
    follow their parent when they have one, and are always sampled as roots.

    Args:
        ratio: the price-path sampling ratio, 0..1.
    """

    def __init__(self, ratio: float) -> None:
        """Sample price-path roots with probability ``ratio``."""
        self.ratio = ratio
        self._price = ParentBased(TraceIdRatioBased(ratio))
        self._other = ParentBased(ALWAYS_ON)

    def should_sample(  # noqa: PLR0917 - the SDK's Sampler signature
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        """Decide by span kind (see the class docstring)."""
        if kind not in (SpanKind.PRODUCER, SpanKind.CONSUMER):
            sampler = self._other
        elif (
            parent_context is not None
            and parent_context.get(CALLER_SAMPLED_KEY) is True
            and not trace.get_current_span(parent_context).get_span_context().is_valid
        ):
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        else:
            sampler = self._price
        return sampler.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        """Describe the sampler."""
        return f"PricePathSampler{{ratio={self.ratio}}}"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def _trace_file_name(role: str, group: str | None, member: str, pid: int) -> str:
    parts = [role, *([group] if group else []), member, str(pid)]
    return "-".join(_UNSAFE_FILE_CHARS.sub("_", part) for part in parts) + ".jsonl"


class Telemetry:
    """One process's telemetry: providers, the metrics registry and their shutdown.

    Attributes:
        enabled: False when ``OTEL_SDK_DISABLED=true`` (every provider is then a no-op).
        tracer_provider: pass it to libraries (``neli.trace_leadership``) or call :meth:`tracer`.
        meter_provider: where :attr:`metrics` live.
        metrics: the application's instruments.
        kafka_stats: librdkafka statistics as metrics; add ``kafka_stats.settings()`` to a
            client's configuration to export its lag, queues and round-trip times.
        resource: the resource attributes of every span and metric.
        destination: where spans go: ``"otlp <url>"``, ``"file <path>"`` or ``"disabled"``.
        trace_file: the JSON-lines file, when spans go to a file.
        az: the availability zone.
        price_sample_ratio: the share of prices whose path is traced (``[telemetry]``).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider,
        meter_provider: otel_metrics.MeterProvider,
        exposition: PrometheusExposition | None,
        resource: Mapping[str, str | int],
        destination: str,
        trace_file: Path | None,
        az: str,
        price_sample_ratio: float = 0.0,
        per_instrument_metrics: bool = False,
        kafka_stats_interval_ms: int = 0,
    ) -> None:
        """Use :func:`setup_telemetry`."""
        self.enabled = exposition is not None
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self._exposition = exposition
        self.resource = dict(resource)
        self.destination = destination
        self.trace_file = trace_file
        self.az = az
        self.price_sample_ratio = price_sample_ratio
        self.metrics = PricingMetrics(
            meter_provider.get_meter(_INSTRUMENTATION), per_instrument=per_instrument_metrics
        )
        #: librdkafka statistics of the clients built with its settings (off when disabled).
        self.kafka_stats = KafkaStats(
            meter_provider.get_meter(_INSTRUMENTATION),
            kafka_stats_interval_ms if self.enabled else 0,
        )
        if exposition is not None:
            exposition.declare(self.metrics.empty_histograms)
        self._closed = False

    @classmethod
    def noop(cls, az: str = "local") -> Telemetry:
        """Telemetry that records nothing (for components built without an entry point)."""
        return cls(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=otel_metrics.NoOpMeterProvider(),
            exposition=None,
            resource={"service.name": SERVICE_NAME},
            destination="disabled",
            trace_file=None,
            az=az,
            price_sample_ratio=0.0,
        )

    def tracer(self, name: str = _INSTRUMENTATION) -> trace.Tracer:
        """A tracer of this process's provider."""
        return self.tracer_provider.get_tracer(name)

    def price_path(self) -> PricePath:
        """The price-path span helper, sampling at this process's ``price_sample_ratio``."""
        return PricePath(self.tracer(), self.price_sample_ratio if self.enabled else 0.0)

    def observe_neli(
        self, neli: Neli, *, roles: Callable[[int], Iterable[str]] | None = None
    ) -> LeadershipTracing:
        """Trace ``neli``'s leadership (with this process's AZ) and feed the leadership metrics.

        Call after registering the application's own barrier handlers and before
        ``neli.start()`` (see :func:`neli.trace_leadership`).
        """
        neli.add_barrier(self.metrics.record_leadership)
        config = getattr(neli, "config", None)  # neli.testing.FakeNeli has group_id instead
        group = str(config.group_id if config is not None else getattr(neli, "group_id", "?"))
        self.metrics.watch_rejections(group, lambda: neli.heartbeats_rejected)
        return trace_leadership(
            neli,
            tracer_provider=self.tracer_provider,
            attributes={"cloud.availability_zone": self.az},
            roles=roles,
        )

    def prometheus_text(self) -> str:
        """The current metrics in Prometheus text format (for ``/metrics``)."""
        if self._exposition is None:
            return ""
        return self._exposition.text()

    def shutdown(self) -> None:
        """Flush and stop exporters (idempotent); call once at process exit."""
        if self._closed:
            return
        self._closed = True
        for provider in (self.tracer_provider, self.meter_provider):
            if isinstance(provider, (TracerProvider, MeterProvider)):
                try:
                    provider.shutdown()
                except Exception:  # telemetry must never fail a shutdown
                    log.exception("telemetry shutdown failed")


def _otlp_url(cfg: AppConfig, env: Mapping[str, str], signal: str) -> str | None:
    base = cfg.telemetry.otlp_endpoint
    if base is None:
        specific = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
        if specific:
            return specific
        base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or None
    return None if base is None else f"{base.rstrip('/')}/v1/{signal}"


def setup_telemetry(
    cfg: AppConfig,
    *,
    service_role: str,
    group: str | None,
    member: str,
    trace_file: Path | None = None,
    env: Mapping[str, str] = os.environ,
    set_global: bool = False,
) -> Telemetry:
    """Build this process's telemetry (see the module docstring).

    Args:
        cfg: the application configuration (``[telemetry]``).
        service_role: ``publisher``, ``relay``, ``subscriber``, ``feed``, ``probe``...
        group: the publishing group (``p1``), if any.
        member: this member's name.
        trace_file: write spans to exactly this JSON-lines file (ignores any OTLP endpoint).
        env: the environment (``OTEL_SDK_DISABLED``, ``OTEL_EXPORTER_OTLP_*``,
            ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``:
            :mod:`pricing_ha.telemetry.otel_env`).
        set_global: also install the providers as OpenTelemetry's global ones (entry points
            only; the global providers can be set once per process).

    Returns:
        The telemetry; call :meth:`Telemetry.shutdown` at exit.

    Raises:
        ConfigError: an unsupported ``OTEL_EXPORTER_OTLP_*PROTOCOL`` or a malformed
            ``OTEL_RESOURCE_ATTRIBUTES``.
    """
    tcfg = cfg.telemetry
    az = tcfg.az
    instance = "/".join([service_role, *([group] if group else []), az, member])
    attrs: dict[str, str | int] = {
        "service.name": SERVICE_NAME,
        "service.version": pricing_ha.__version__,
        "service.instance.id": instance,
        "cloud.availability_zone": az,
        "process.pid": os.getpid(),
        "pricing_ha.role": service_role,
    }
    if group:
        attrs["pricing_ha.group"] = group
    # The deployment's OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME win over these defaults.
    attrs.update(env_resource_attributes(env))
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        log.info("telemetry disabled by OTEL_SDK_DISABLED")
        return Telemetry(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=otel_metrics.NoOpMeterProvider(),
            exposition=None,
            resource=attrs,
            destination="disabled",
            trace_file=None,
            az=az,
        )
    check_otlp_protocols(env)
    resource = Resource.create(attrs)
    exporter: SpanExporter
    exposition = PrometheusExposition()
    readers: list[MetricReader] = [exposition.reader]
    traces_url = None if trace_file is not None else _otlp_url(cfg, env, "traces")
    if traces_url is not None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        exporter = OTLPSpanExporter(endpoint=traces_url)
        processor = BatchSpanProcessor(exporter)
        metrics_url = _otlp_url(cfg, env, "metrics")
        if metrics_url is not None:  # only a traces endpoint may be set
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=metrics_url)))
        destination = f"otlp {traces_url}"
    else:
        path = trace_file or tcfg.traces_dir / _trace_file_name(
            service_role, group, member, os.getpid()
        )
        exporter = JsonLinesSpanExporter(path)
        processor = BatchSpanProcessor(exporter, schedule_delay_millis=_FILE_EXPORT_DELAY_MS)
        trace_file = path
        destination = f"file {path}"
    tracer_provider = TracerProvider(
        resource=resource, sampler=PricePathSampler(tcfg.price_sample_ratio)
    )
    tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    if set_global:
        trace.set_tracer_provider(tracer_provider)
        otel_metrics.set_meter_provider(meter_provider)
    log.info("telemetry for %s: spans to %s", instance, destination)
    return Telemetry(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        exposition=exposition,
        resource=attrs,
        destination=destination,
        trace_file=trace_file,
        az=az,
        price_sample_ratio=tcfg.price_sample_ratio,
        per_instrument_metrics=tcfg.per_instrument_metrics,
        kafka_stats_interval_ms=tcfg.kafka_stats_interval_ms,
    )
