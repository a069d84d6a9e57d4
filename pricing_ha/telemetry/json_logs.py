"""Log records as JSON lines carrying the current trace and span ids (``[telemetry] json_logs``).

A log line written inside a span (a leadership transition, a relay switch, a price's path)
names that span, so a log search and a trace view meet on ``trace_id``/``span_id`` (the W3C
ids in lowercase hex, as OpenTelemetry's log data model and the exporters write them). Each
line is one object::

    {"time": "2026-01-02T03:04:05.678Z", "level": "WARNING", "logger": "pricing_ha.relay",
     "message": "...", "trace_id": "4bf9...", "span_id": "00f0...", "pid": 123}

``trace_id`` and ``span_id`` are present only when a valid span is current in the thread that
logged; ``exception`` holds the formatted traceback when there is one. The ids are read from
the OpenTelemetry API's current span, so it works with whatever tracer provider is set up.
"""

from __future__ import annotations

import datetime as dt
import logging

import orjson
from opentelemetry import trace

__all__ = ["JsonLogFormatter", "use_json_logs"]


class JsonLogFormatter(logging.Formatter):
    """Formats a record as one JSON object (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line (without the newline)."""
        when = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
        doc: dict[str, object] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            doc["trace_id"] = trace.format_trace_id(context.trace_id)
            doc["span_id"] = trace.format_span_id(context.span_id)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        doc["pid"] = record.process
        return orjson.dumps(doc, default=str).decode()


def use_json_logs(logger: logging.Logger | None = None) -> None:
    """Give every handler of ``logger`` (default: the root logger) the JSON formatter."""
    for handler in (logger or logging.getLogger()).handlers:
        handler.setFormatter(JsonLogFormatter())
