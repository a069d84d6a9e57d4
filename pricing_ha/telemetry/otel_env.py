"""The OpenTelemetry SDK environment variables pricing-ha honours, read as the specification says.

* ``OTEL_RESOURCE_ATTRIBUTES`` (``key=value`` pairs, comma-separated, values percent-decoded) and
  ``OTEL_SERVICE_NAME`` (which wins over a ``service.name`` in the former) override the
  application's own resource attributes: the deployment knows better than the code what this
  service is called and where it runs.
* ``OTEL_EXPORTER_OTLP_PROTOCOL`` and its per-signal forms ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``
  and ``OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`` (which win for their signal): pricing-ha ships the
  OTLP/HTTP protobuf exporter only, so ``http/protobuf`` is accepted and any other value (``grpc``,
  ``http/json``) stops the start-up with a :class:`~pricing_ha.errors.ConfigError` naming the
  variable, instead of being silently ignored.

``OTEL_SDK_DISABLED`` and the endpoints are read by :mod:`pricing_ha.telemetry.sdk`; the
exporter itself reads ``OTEL_EXPORTER_OTLP_HEADERS``, ``..._TIMEOUT``, ``..._COMPRESSION`` and
the certificate variables.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

from pricing_ha.errors import ConfigError

__all__ = ["SUPPORTED_OTLP_PROTOCOL", "check_otlp_protocols", "env_resource_attributes"]

#: The only OTLP transport whose exporter is installed.
SUPPORTED_OTLP_PROTOCOL = "http/protobuf"


def env_resource_attributes(env: Mapping[str, str]) -> dict[str, str]:
    """The resource attributes the environment sets, ``OTEL_SERVICE_NAME`` applied last.

    Raises:
        ConfigError: a pair of ``OTEL_RESOURCE_ATTRIBUTES`` has no ``=`` or an empty key.
    """
    attrs: dict[str, str] = {}
    raw = env.get("OTEL_RESOURCE_ATTRIBUTES", "").strip()
    for pair in filter(None, (p.strip() for p in raw.split(","))):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                "environment", "OTEL_RESOURCE_ATTRIBUTES", f"{pair!r} is not key=value"
            )
        attrs[key.strip()] = urllib.parse.unquote(value.strip())
    service = env.get("OTEL_SERVICE_NAME", "").strip()
    if service:
        attrs["service.name"] = service
    return attrs


def check_otlp_protocols(env: Mapping[str, str]) -> None:
    """Refuse an OTLP protocol whose exporter is not installed (see the module docstring).

    Raises:
        ConfigError: naming the variable, its value and what to set instead.
    """
    general = "OTEL_EXPORTER_OTLP_PROTOCOL"
    for signal in ("TRACES", "METRICS"):
        specific = f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"
        variable = specific if env.get(specific, "").strip() else general
        value = env.get(variable, "").strip()
        if value and value.lower() != SUPPORTED_OTLP_PROTOCOL:
            raise ConfigError(
                "environment",
                variable,
                f"{value!r} is not supported: pricing-ha ships the OTLP exporter for "
                f"{SUPPORTED_OTLP_PROTOCOL} only (no grpc or http/json exporter is installed); "
                f"set {SUPPORTED_OTLP_PROTOCOL} and use the collector's OTLP/HTTP port (4318)",
            )
