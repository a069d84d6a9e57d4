"""librdkafka's connection failures: hidden until the first connection, then one per minute."""

from __future__ import annotations

import logging

from pricing_ha.kafka.client_log import REPEAT_S, ConnectionLogFilter

FAIL = (
    "FAIL",
    "rdkafka#consumer-1",
    "[thrd:10.0.0.1:9092/1]: 10.0.0.1:9092/1: Connect to ipv4#10.0.0.1:9092 failed: "
    "Connection refused (after 0ms in state CONNECT)",
)


def _record(args: tuple[str, str, str]) -> logging.LogRecord:
    return logging.LogRecord("x", logging.ERROR, __file__, 1, "%s [%s] %s", args, None)


def test_failures_before_the_first_connection_are_hidden() -> None:
    """Before the broker ever answered, the command's own error is the only line."""
    f = ConnectionLogFilter(connected=lambda: False)
    assert not any(f.filter(_record(FAIL)) for _ in range(50))


def test_after_connecting_one_line_per_broker_per_window_with_the_hidden_count() -> None:
    """A lost broker is logged once, then again after REPEAT_S with how many were hidden."""
    now = [0.0]
    f = ConnectionLogFilter(connected=lambda: True, clock=lambda: now[0])
    shown = [f.filter(_record(FAIL)) for _ in range(5)]
    assert shown == [True, False, False, False, False]
    now[0] = REPEAT_S + 1
    again = _record(FAIL)
    assert f.filter(again)
    assert "(4 more like it hidden; --verbose shows all)" in again.getMessage()


def test_other_records_pass() -> None:
    """Records that are not connection failures are never touched."""
    f = ConnectionLogFilter(connected=lambda: False)
    assert f.filter(_record(("REQTMOUT", "rdkafka#producer-1", "Timed out ProduceRequest")))
    plain = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom %s", ("x",), None)
    assert f.filter(plain)
