"""librdkafka's statistics as OpenTelemetry metrics: consumer lag, producer queues, broker RTT.

A client built with :meth:`KafkaStats.settings` (``statistics.interval.ms`` from ``[telemetry]
kafka_stats_interval_ms`` and ``stats_cb``) hands librdkafka's statistics JSON to
:meth:`KafkaStats.on_stats` from its ``poll()``/``flush()``, every interval. Only the figures an
operator alerts on are kept, per client (its ``client.id``), and observed by gauges:

=========================================  ==========  =========================================
instrument                                 unit        attributes
=========================================  ==========  =========================================
``pricing_ha.kafka.consumer.lag``          messages    client, topic, partition
``pricing_ha.kafka.producer.queue.depth``  messages    client (records waiting in the producer)
``pricing_ha.kafka.producer.queue.size``   bytes       client
``pricing_ha.kafka.broker.rtt``            s           client, broker (node id), stat (avg/p99)
=========================================  ==========  =========================================

Consumer lag is librdkafka's ``consumer_lag``: the partition's high watermark (the last stable
offset under ``read_committed``) less the group's committed offset, for partitions the client
has assigned; a partition whose lag librdkafka does not know yet (nothing committed) is left out,
not reported as 0. A broker's round-trip time is reported only for brokers the client spoke to
in the interval (bootstrap placeholders are skipped). A client that stops reporting (closed or
replaced) is dropped after three intervals, so its last figures do not linger.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

__all__ = ["KafkaStats"]

log = logging.getLogger("pricing_ha.telemetry")

_US = 1e-6  # librdkafka reports round-trip times in microseconds
# A client silent for this many intervals is gone (closed, replaced).
_STALE_INTERVALS = 3


@dataclass
class _ClientFigures:
    at: float
    lag: dict[tuple[str, str], int] = field(default_factory=dict)
    queue_messages: int | None = None
    queue_bytes: int | None = None
    rtt_s: dict[tuple[str, str], float] = field(default_factory=dict)


def _parse(doc: Mapping[str, Any], at: float) -> _ClientFigures:
    figures = _ClientFigures(at)
    if doc.get("type") == "producer":
        figures.queue_messages = int(doc.get("msg_cnt", 0))
        figures.queue_bytes = int(doc.get("msg_size", 0))
    for topic, tdoc in (doc.get("topics") or {}).items():
        for pid, pdoc in (tdoc.get("partitions") or {}).items():
            lag = int(pdoc.get("consumer_lag", -1))
            if int(pid) >= 0 and lag >= 0 and pdoc.get("fetch_state", "none") != "none":
                figures.lag[(topic, str(pid))] = lag
    for bdoc in (doc.get("brokers") or {}).values():
        node = int(bdoc.get("nodeid", -1))
        rtt = bdoc.get("rtt") or {}
        if node < 0 or int(rtt.get("cnt", 0)) <= 0:
            continue
        for stat in ("avg", "p99"):
            figures.rtt_s[(str(node), stat)] = float(rtt.get(stat, 0)) * _US
    return figures


class KafkaStats:
    """The latest librdkafka statistics of this process's clients, observed as gauges.

    Thread-safe: librdkafka calls :meth:`on_stats` from whichever thread polls the client.

    Args:
        meter: where the gauges live.
        interval_ms: ``statistics.interval.ms``; 0 turns statistics off (:meth:`settings` is
            then empty).
        clock: monotonic seconds (tests inject one).
    """

    def __init__(
        self, meter: Meter, interval_ms: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Create the gauges."""
        self.interval_ms = interval_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, _ClientFigures] = {}
        gauges = (
            ("consumer.lag", self._observe_lag, "{message}", "Messages between the "
             "partition's end and the group's committed offset"),
            ("producer.queue.depth", self._observe_queue_messages, "{message}",
             "Records waiting in the producer (queued or in flight)"),
            ("producer.queue.size", self._observe_queue_bytes, "By",
             "Bytes of the records waiting in the producer"),
            ("broker.rtt", self._observe_rtt, "s",
             "Round-trip time of requests to the broker over the last interval"),
        )  # fmt: skip
        for name, observe, unit, text in gauges:
            meter.create_observable_gauge(
                f"pricing_ha.kafka.{name}", callbacks=[observe], unit=unit, description=text
            )

    def settings(self) -> dict[str, Any]:
        """The librdkafka settings that make a client report here (empty when off)."""
        if self.interval_ms <= 0:
            return {}
        return {"statistics.interval.ms": self.interval_ms, "stats_cb": self.on_stats}

    def on_stats(self, stats_json: str) -> None:
        """librdkafka's ``stats_cb``: keep the figures of the reporting client."""
        try:
            doc = json.loads(stats_json)
            client = str(doc.get("client_id") or doc.get("name") or "?")
            figures = _parse(doc, self._clock())
        except (ValueError, TypeError, AttributeError):
            log.warning("librdkafka statistics not understood; ignored", exc_info=True)
            return
        with self._lock:
            self._clients[client] = figures

    def _current(self) -> list[tuple[str, _ClientFigures]]:
        horizon = self._clock() - _STALE_INTERVALS * self.interval_ms / 1000
        with self._lock:
            for client in [c for c, f in self._clients.items() if f.at < horizon]:
                del self._clients[client]
            return list(self._clients.items())

    def _observe_lag(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(lag, {"client": client, "topic": topic, "partition": partition})
            for client, figures in self._current()
            for (topic, partition), lag in figures.lag.items()
        ]

    def _observe_queue_messages(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(f.queue_messages, {"client": client})
            for client, f in self._current()
            if f.queue_messages is not None
        ]

    def _observe_queue_bytes(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(f.queue_bytes, {"client": client})
            for client, f in self._current()
            if f.queue_bytes is not None
        ]

    def _observe_rtt(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(seconds, {"client": client, "broker": broker, "stat": stat})
            for client, figures in self._current()
            for (broker, stat), seconds in figures.rtt_s.items()
        ]
