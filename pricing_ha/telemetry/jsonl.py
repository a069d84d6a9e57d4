"""A span exporter writing one JSON object per line: traces with no collector.

Each line is one finished span::

    {"name": "neli.acquired", "kind": "INTERNAL", "trace_id": "<32 hex>", "span_id": "<16 hex>",
     "parent": "<16 hex>" | null, "start_ns": ..., "end_ns": ...,
     "status": {"code": "UNSET", "description": null}, "attributes": {...},
     "events": [{"name": ..., "ts_ns": ..., "attributes": {...}}],
     "links": [{"trace_id": ..., "span_id": ..., "attributes": {...}}],
     "resource": {...}, "scope": "neli"}

Lines are appended and flushed per export batch, so a process killed with SIGKILL loses only the
spans it had not yet exported (and spans that never ended, such as an open leadership term;
their ids survive as the ``parent`` of their children and in other members' links).
:func:`load_spans` reads such a file back, ignoring a torn last line.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["JsonLinesSpanExporter", "load_spans", "span_to_dict"]

log = logging.getLogger("pricing_ha.telemetry")


def _attrs(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if not attributes:
        return {}
    return {
        k: list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
        for k, v in attributes.items()
    }


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """The JSON-ready form of one finished span (see the module docstring)."""
    ctx = span.context
    trace_id = f"{ctx.trace_id:032x}" if ctx is not None else None
    span_id = f"{ctx.span_id:016x}" if ctx is not None else None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": trace_id,
        "span_id": span_id,
        "parent": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "attributes": _attrs(span.attributes),
        "events": [
            {"name": e.name, "ts_ns": e.timestamp, "attributes": _attrs(e.attributes)}
            for e in span.events
        ],
        "links": [
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": _attrs(link.attributes),
            }
            for link in span.links
        ],
        "resource": _attrs(span.resource.attributes),
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
    }


class JsonLinesSpanExporter(SpanExporter):
    """Appends finished spans to ``path``, one JSON object per line.

    Args:
        path: the file; its directory is created if needed.
    """

    def __init__(self, path: Path) -> None:
        """Open ``path`` for appending."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] | None = path.open("ab")
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write ``spans`` and flush."""
        data = b"".join(
            orjson.dumps(span_to_dict(s), default=str, option=orjson.OPT_APPEND_NEWLINE)
            for s in spans
        )
        with self._lock:
            if self._file is None:
                return SpanExportResult.FAILURE
            try:
                self._file.write(data)
                self._file.flush()
            except OSError:
                log.exception("cannot write spans to %s", self.path)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Every export is already flushed."""
        return True

    def shutdown(self) -> None:
        """Close the file; later exports fail."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def load_spans(path: Path) -> list[dict[str, Any]]:
    """Read a JSON-lines span file; a torn last line (the writer was killed) is skipped."""
    spans: list[dict[str, Any]] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            spans.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            log.warning("skipping a torn line in %s", path)
    return spans
