"""A consumer whose look-ups of committed offsets survive a wedged coordinator connection.

After a broker stall, a consumer can stop getting answers to ``Consumer.committed`` for as
long as it lives: a relay's ``prices.raw`` consumer, after a 6 s pause of its broker, asked
every 0.5 to 5 s for 90 s and every look-up timed out, while the same process's other clients
(its NELI member, its standby tail) were answered (docs/measurements.md). Partitions it took
up could then not start at their committed offsets, and ``prices`` stopped. A new client
shares none of the old one's connection state, like the client of a restarted process.

:class:`LookupConsumer` is an ordinary consumer until its look-ups have timed out for
:data:`FRESH_AFTER_S`; from then on, each look-up that times out is asked again by a new
client of the same group and settings, which is closed after it answered. Only the answer
comes from that client; the consumer keeps its assignment and positions, and a look-up of
its own that is answered again ends the detour.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pricing_ha.kafka.positions import error_code

__all__ = ["FRESH_AFTER_S", "FRESH_TIMEOUT_S", "LookupConsumer"]

log = logging.getLogger("pricing_ha.kafka")

#: How long a consumer's own look-ups must have been timing out before a new client is asked.
FRESH_AFTER_S = 2.0
#: The least time a new client is given to connect, find the coordinator and answer.
FRESH_TIMEOUT_S = 1.0
# Settings a look-up client does not take over: it reports no statistics of its own.
_NOT_COPIED = frozenset({"stats_cb", "statistics.interval.ms"})


class LookupConsumer(Consumer):
    """A :class:`confluent_kafka.Consumer` whose ``committed`` falls back to a new client
    while its own look-ups keep timing out (module docstring)."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        logger: logging.Logger | None = None,
        make: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        """Create the consumer from ``settings``.

        Args:
            settings: librdkafka settings, as for :class:`confluent_kafka.Consumer`.
            logger: where librdkafka's log lines go.
            make: builds a look-up client from its settings (tests pass a fake); a
                :class:`confluent_kafka.Consumer` by default.
        """
        if logger is None:
            super().__init__(dict(settings))
        else:
            super().__init__(dict(settings), logger=logger)
        self._name = str(settings.get("client.id", "consumer"))
        self._lookup_settings = {k: v for k, v in settings.items() if k not in _NOT_COPIED}
        self._lookup_settings["client.id"] = f"{self._name}-lookup"
        self._make = make or (lambda s: Consumer(s, logger=logger or log))
        self._failing_since: float | None = None
        self._fresh_used = False

    def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The committed offsets of ``partitions``, asked as :meth:`Consumer.committed` does;
        while this consumer's own look-ups have timed out for :data:`FRESH_AFTER_S`, a new
        client of the group is asked after each one that times out.

        Raises:
            KafkaException: the look-up failed (or timed out, the new client's too).
        """
        try:
            got: list[TopicPartition] = (
                super().committed(partitions)
                if timeout is None
                else super().committed(partitions, timeout=timeout)
            )
        except KafkaException as exc:
            if error_code(exc) != KafkaError._TIMED_OUT:
                raise
            now = time.monotonic()
            if self._failing_since is None:
                self._failing_since = now
            if now - self._failing_since < FRESH_AFTER_S:
                raise
            timeout_s = max(timeout or 0.0, FRESH_TIMEOUT_S)
            return self._ask_fresh(partitions, timeout_s, now - self._failing_since)
        if self._failing_since is not None and self._fresh_used:
            log.info(
                "%s: committed offsets answered again after %.1f s",
                self._name,
                time.monotonic() - self._failing_since,
            )
        self._failing_since = None
        self._fresh_used = False
        return got

    def _ask_fresh(
        self, partitions: list[TopicPartition], timeout_s: float, failing_s: float
    ) -> list[TopicPartition]:
        start = time.monotonic()
        client = self._make(dict(self._lookup_settings))
        try:
            got: list[TopicPartition] = client.committed(partitions, timeout=timeout_s)
        finally:
            # Closing may wait for a coordinator that does not answer: never on this thread.
            threading.Thread(target=client.close, name="lookup-close", daemon=True).start()
        if not self._fresh_used:
            log.warning(
                "%s: committed offsets not answered for %.1f s; a new client of the group"
                " answered in %.2f s (asked so until this consumer is answered again)",
                self._name,
                failing_s,
                time.monotonic() - start,
            )
        self._fresh_used = True
        return got
