"""Render OpenTelemetry SDK metrics as Prometheus text exposition format 0.0.4 (``/metrics``).

Names follow the OpenTelemetry-to-Prometheus rules in their simple form: characters outside
``[a-zA-Z0-9_:]`` become ``_``; the unit is appended for seconds, milliseconds and bytes
(``pricing_ha.price.latency`` in ``s`` becomes ``pricing_ha_price_latency_seconds``); monotonic
sums are counters named ``..._total``; non-monotonic sums and gauges are gauges; explicit-bucket
histograms become ``_bucket{le=...}`` (cumulative), ``_sum`` and ``_count``. Exponential
histograms are skipped (none is configured). Every family is written once, with its HELP and
TYPE lines before its samples, whatever scope it came from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics.export import Gauge, Histogram, Metric, MetricsData, Sum

from pricing_ha.telemetry.metrics import EmptyHistogram

__all__ = ["CONTENT_TYPE", "render_prometheus"]

#: The Content-Type of the exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")
_UNIT_SUFFIX = {"s": "seconds", "ms": "milliseconds", "By": "bytes"}


@dataclass
class _Family:
    kind: str
    help: str
    samples: list[str] = field(default_factory=list)


def _name(raw: str, unit: str | None, total: bool) -> str:
    name = _INVALID_NAME.sub("_", raw)
    if name[:1].isdigit():
        name = "_" + name
    suffix = _UNIT_SUFFIX.get(unit or "")
    if suffix and not name.endswith("_" + suffix):
        name = f"{name}_{suffix}"
    if total and not name.endswith("_total"):
        name += "_total"
    return name


def _label_name(raw: str) -> str:
    name = _INVALID_LABEL.sub("_", raw)
    if name[:1].isdigit():
        name = "_" + name
    return name


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")


def _escape_help(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n")


def _value(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _labels(attributes: Mapping[str, Any] | None, extra: Mapping[str, str] | None = None) -> str:
    items = {_label_name(k): str(v) for k, v in (attributes or {}).items()}
    items.update(extra or {})
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(items.items())) + "}"


def _add(families: dict[str, _Family], metric: Metric) -> None:
    data = metric.data
    help_text = _escape_help(metric.description or metric.name)
    if isinstance(data, Sum):
        counter = data.is_monotonic
        name = _name(metric.name, metric.unit, total=counter)
        fam = families.setdefault(name, _Family("counter" if counter else "gauge", help_text))
        fam.samples.extend(
            f"{name}{_labels(p.attributes)} {_value(p.value)}" for p in data.data_points
        )
    elif isinstance(data, Gauge):
        name = _name(metric.name, metric.unit, total=False)
        fam = families.setdefault(name, _Family("gauge", help_text))
        fam.samples.extend(
            f"{name}{_labels(p.attributes)} {_value(p.value)}" for p in data.data_points
        )
    elif isinstance(data, Histogram):
        name = _name(metric.name, metric.unit, total=False)
        fam = families.setdefault(name, _Family("histogram", help_text))
        for p in data.data_points:
            cumulative = 0
            for bound, count in zip(p.explicit_bounds, p.bucket_counts, strict=False):
                cumulative += count
                le = _labels(p.attributes, {"le": _value(float(bound))})
                fam.samples.append(f"{name}_bucket{le} {cumulative}")
            inf = _labels(p.attributes, {"le": "+Inf"})
            fam.samples.append(f"{name}_bucket{inf} {p.count}")
            fam.samples.append(f"{name}_sum{_labels(p.attributes)} {_value(p.sum)}")
            fam.samples.append(f"{name}_count{_labels(p.attributes)} {p.count}")


def _add_empty(families: dict[str, _Family], empty: EmptyHistogram) -> None:
    """``empty`` as a histogram with every bucket at 0, unless it was measured."""
    name = _name(empty.name, empty.unit, total=False)
    attrs = dict(empty.attributes)
    fam = families.setdefault(name, _Family("histogram", _escape_help(empty.description)))
    count = f"{name}_count{_labels(attrs)} "
    if any(sample.startswith(count) for sample in fam.samples):
        return
    for bound in empty.bounds:
        fam.samples.append(f"{name}_bucket{_labels(attrs, {'le': _value(float(bound))})} 0")
    fam.samples.append(f"{name}_bucket{_labels(attrs, {'le': '+Inf'})} 0")
    fam.samples.append(f"{name}_sum{_labels(attrs)} 0")
    fam.samples.append(f"{count}0")


def render_prometheus(
    data: MetricsData | None, empty_histograms: Iterable[EmptyHistogram] = ()
) -> str:
    """The Prometheus 0.0.4 text of ``data`` (empty text for ``None``), plus each of
    ``empty_histograms`` not measured yet, as an empty histogram."""
    families: dict[str, _Family] = {}
    for resource_metrics in data.resource_metrics if data is not None else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                _add(families, metric)
    for empty in empty_histograms:
        _add_empty(families, empty)
    lines: list[str] = []
    for name in sorted(families):
        fam = families[name]
        lines += [f"# HELP {name} {fam.help}", f"# TYPE {name} {fam.kind}", *fam.samples]
    return "".join(line + "\n" for line in lines)
