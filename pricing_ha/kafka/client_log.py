"""librdkafka's log, made readable: connection failures collapsed, the rest as it comes.

librdkafka logs a ``FAIL`` line for every reconnection attempt (about 20 per second against a
closed port), so a command pointed at a broker that is down printed ~190 such lines before its
one useful error. Clients hand their log to Python logging (``logger=`` of confluent-kafka, served
from their ``poll``), and :func:`configure_logging`, called by every command that connects, puts
a :class:`ConnectionLogFilter` on the stderr handler:

* until the process has reached the broker once (:func:`mark_connected`, called when cluster
  metadata arrives), connection failures are dropped: the command's own error (exit 3, "the
  broker at ... did not answer within ...") is the one line that says what is wrong;
* afterwards (a broker lost while running), the first failure per broker is logged, then at
  most one line per broker every :data:`REPEAT_S` seconds, with the count of those hidden.

``--verbose`` (:func:`configure_logging` with ``verbose=True``) keeps librdkafka's full log:
no filter, and clients built with :func:`client_log_settings` print straight to stderr as
librdkafka does by itself.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "REPEAT_S",
    "ConnectionLogFilter",
    "client_log_settings",
    "configure_logging",
    "mark_connected",
]

#: After the first connection: one failure line per broker per this many seconds, at most.
REPEAT_S = 60.0

# The facilities and texts of librdkafka's connection-failure lines (a broker that refuses,
# resets, cannot be resolved or times out; "all brokers are down").
_FAILURE_FACILITIES = frozenset({"FAIL", "ERROR"})
_FAILURE_TEXT = re.compile(
    r"Connect to .* failed|Connection refused|Failed to resolve|Disconnected|"
    r"brokers are down|timed out|Connection reset|SASL authentication error",
    re.IGNORECASE,
)
_BROKER = re.compile(r"\]: (\S+?)(?:/\S+)?: ")

_KAFKA_LOGGER = "pricing_ha.kafka.client"

_state = threading.Lock()
_connected = False
_verbose = False


def mark_connected() -> None:
    """The process reached the broker: from now on, connection failures are news."""
    global _connected  # noqa: PLW0603 - one process, one answer to "have we connected?"
    with _state:
        _connected = True


def _is_connected() -> bool:
    with _state:
        return _connected


def client_log_settings() -> dict[str, Any]:
    """``{"logger": ...}``, a client setting, for a client with no logger of its own.

    Used by the status reader and the admin client.

    Empty under ``--verbose``: librdkafka then prints its full log to stderr itself. (A client
    with a logger hands its log over from ``poll`` only; these clients mostly ask for metadata,
    so without ``--verbose`` their log is seldom shown at all.)
    """
    return {} if _verbose else {"logger": logging.getLogger(_KAFKA_LOGGER)}


class ConnectionLogFilter(logging.Filter):
    """Drops or collapses librdkafka's connection-failure records (see the module docstring).

    Args:
        connected: whether the process has reached the broker (default: :func:`mark_connected`).
        clock: monotonic seconds, injectable for tests.
    """

    def __init__(
        self,
        *,
        connected: Callable[[], bool] = _is_connected,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Nothing seen yet."""
        super().__init__()
        self._connected = connected
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._hidden: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a connection failure to hide; other records pass unchanged."""
        broker = _connection_failure(record)
        if broker is None:
            return True
        if not self._connected():
            return False
        now = self._clock()
        with self._lock:
            last = self._last.get(broker)
            if last is not None and now - last < REPEAT_S:
                self._hidden[broker] = self._hidden.get(broker, 0) + 1
                return False
            self._last[broker] = now
            hidden = self._hidden.pop(broker, 0)
        if hidden:
            record.msg = (
                f"{record.getMessage()} ({hidden} more like it hidden; --verbose shows all)"
            )
            record.args = None
        return True


def _connection_failure(record: logging.LogRecord) -> str | None:
    """The broker a librdkafka connection-failure record is about, else None."""
    args = record.args
    if not (isinstance(args, tuple) and len(args) == 3 and record.msg == "%s [%s] %s"):
        return None
    facility, _client, text = args
    if facility not in _FAILURE_FACILITIES or not _FAILURE_TEXT.search(str(text)):
        return None
    match = _BROKER.search(str(text))
    return match[1] if match else "(all brokers)"


def configure_logging(
    *, verbose: bool, level: int = logging.WARNING, fmt: str | None = None
) -> None:
    """Log to stderr at ``level``; unless ``verbose``, with :class:`ConnectionLogFilter`.

    Call once, at the start of a command, before any client exists.
    """
    global _verbose  # noqa: PLW0603 - set once per process by its command line
    _verbose = verbose
    logging.basicConfig(level=level, format=fmt or "%(message)s")
    if verbose:
        return
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, ConnectionLogFilter) for f in handler.filters):
            handler.addFilter(ConnectionLogFilter())
