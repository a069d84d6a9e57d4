"""Telemetry infrastructure: the OpenTelemetry SDK set-up, metrics, the health endpoints.

The application owns the SDK (the ``neli`` library only uses the API); it is set up in :mod:`.sdk`.
This package imports no application module (a layering test checks):

* :func:`setup_telemetry` (:mod:`.sdk`): resource, tracer and meter providers, exporters (OTLP/HTTP
  or a JSON-lines file per process), sampling;
* :class:`PricingMetrics` (:mod:`.metrics`): every metric instrument, via ``telemetry.metrics``;
* :class:`HealthServer` (:mod:`.health`): ``/healthz``, ``/readyz`` and ``/metrics``;
* :mod:`.jsonl`: the file exporter; :class:`PrometheusExposition` (:mod:`.prometheus`):
  ``/metrics`` through OpenTelemetry's Prometheus exporter and ``prometheus_client``.

Typical entry point::

    telemetry = setup_telemetry(cfg, service_role="publisher", group="p1", member="m1")
    telemetry.observe_neli(neli)           # leadership spans, fail-over links, leadership gauge
    health = HealthServer(cfg.health.host, health_port(cfg.health, "publisher"),
                          metrics=telemetry.prometheus_text)
    health.add_check("broker", broker_reachable(cfg.broker.bootstrap_servers))
    async with health:
        ...
    telemetry.shutdown()
"""

from __future__ import annotations

from pricing_ha.telemetry.health import (
    Check,
    CheckResult,
    HealthServer,
    Readiness,
    broker_reachable,
    health_port,
    tcp_reachable,
)
from pricing_ha.telemetry.jsonl import JsonLinesSpanExporter, load_spans
from pricing_ha.telemetry.metrics import PricingMetrics
from pricing_ha.telemetry.prometheus import PrometheusExposition
from pricing_ha.telemetry.sdk import PricePathSampler, Telemetry, setup_telemetry

__all__ = [
    "Check",
    "CheckResult",
    "HealthServer",
    "JsonLinesSpanExporter",
    "PricePathSampler",
    "PricingMetrics",
    "PrometheusExposition",
    "Readiness",
    "Telemetry",
    "broker_reachable",
    "health_port",
    "load_spans",
    "setup_telemetry",
    "tcp_reachable",
]
