"""JSON log lines carrying the current trace and span ids (--json-logs, telemetry.json_logs)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider

from pricing_ha.cli._options import with_json_logs
from pricing_ha.config import AppConfig, load_config
from pricing_ha.telemetry.json_logs import JsonLogFormatter


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing through the JSON formatter into a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger("pricing_ha.test_json_logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_logged_inside_a_span_names_its_trace_and_span(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    """Inside a span: trace_id (32 hex) and span_id (16 hex) of that span; outside: none."""
    logger, stream = captured
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("relay.switch") as span:
        logger.warning("switched %s", "EURUSD")
    logger.info("no span here")
    provider.shutdown()
    inside, outside = _lines(stream)
    context = span.get_span_context()
    assert inside["trace_id"] == f"{context.trace_id:032x}"
    assert inside["span_id"] == f"{context.span_id:016x}"
    assert inside["message"] == "switched EURUSD"
    assert inside["level"] == "WARNING"
    assert inside["logger"] == "pricing_ha.test_json_logs"
    assert str(inside["time"]).endswith("Z")
    assert "trace_id" not in outside
    assert "span_id" not in outside


def test_exceptions_and_odd_messages_stay_one_json_line(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    """A traceback and a message with quotes and newlines are one parseable line."""
    logger, stream = captured
    try:
        raise ValueError("bad")
    except ValueError:
        logger.exception('a "quoted"\nmessage')
    (line,) = _lines(stream)
    assert line["message"] == 'a "quoted"\nmessage'
    assert "ValueError: bad" in str(line["exception"])


def test_json_logs_switch_from_option_or_config_sets_the_root_formatter() -> None:
    """--json-logs (or telemetry.json_logs) puts the JSON formatter on the root handlers."""
    root = logging.getLogger()
    handler = logging.StreamHandler(io.StringIO())
    root.addHandler(handler)
    try:
        assert with_json_logs(AppConfig(), False).telemetry.json_logs is False
        assert not isinstance(handler.formatter, JsonLogFormatter)
        assert with_json_logs(AppConfig(), True).telemetry.json_logs is True
        assert isinstance(handler.formatter, JsonLogFormatter)
        handler.setFormatter(None)
        cfg = load_config(None, {"PRICING_HA__TELEMETRY__JSON_LOGS": "true"})
        with_json_logs(cfg, False)
        assert isinstance(handler.formatter, JsonLogFormatter)
    finally:
        root.removeHandler(handler)
