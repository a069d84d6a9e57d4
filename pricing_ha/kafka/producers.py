"""Producers that recover instead of wedging: the one place deciding "this producer is finished".

An idempotent producer (``enable.idempotence`` without ``transactional.id``) whose records time
out (``_MSG_TIMED_OUT``) bumps its epoch locally (KIP-360) without asking the broker. Apache
Kafka accepts the bumped epoch; a broker that accepts only the epoch its InitProducerId handed
out answers ``PRODUCER_FENCED`` (or ``INVALID_PRODUCER_EPOCH``) to every later batch, and
librdkafka bumps again on each rejection. None of these errors is ``fatal()``, ``retriable()``
or ``txn_requires_abort()``: code waiting for a fatal error would wait forever. Either way, a
record that timed out may or may not have landed: replacing the producer and replaying what
was not acknowledged, in order, recovers the same way on any broker. A new producer delivers
about 0.5 s after the broker answers again (librdkafka retries acquiring a producer id every
500 ms while no broker is up).

* :func:`producer_is_wedged` is the pure decision: the reason an error ends a producer, or
  ``None``.
* :class:`ReplaceableProducer` owns one producer built from a configuration dict. Its
  :meth:`~ReplaceableProducer.produce` classifies every failed delivery; the owner calls
  :meth:`~ReplaceableProducer.replace_if_wedged` at a point where replacing is safe (never
  inside a delivery callback): the old producer is purged and briefly flushed, so the delivery
  callbacks of everything it still held run (with ``_PURGE_QUEUE`` / ``_PURGE_INFLIGHT``) before
  the new producer exists, then the ``on_replaced`` hook lets the owner re-establish its state
  (replay what was not acknowledged). It logs one line per replacement, with the reason and the
  failures counted since the previous one, and at most one line per ``report_interval_s`` for
  failures that do not end the producer; it never logs per record.

Replacing loses nothing by itself only if the owner replays: a purged or timed-out record may
or may not have reached the broker, so the owner must treat it as not delivered and be ready
for a duplicate (the relay rebuilds from its output, the publisher's duplicates are dropped by
the relay, the feed's by sequence checks downstream).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import KafkaError, Producer

__all__ = [
    "PRODUCER_DEFAULTS",
    "DeliveryCallback",
    "ProducerClient",
    "ReplaceableProducer",
    "is_idempotent",
    "is_transactional",
    "producer_is_wedged",
]

ConfigValue = str | int | float | bool
DeliveryCallback = Callable[[Any, Any], None]
"""A confluent-kafka delivery callback: ``(err: KafkaError | None, msg: Message)``."""

_LIBRDKAFKA_MESSAGE_TIMEOUT_MS = 300_000  # librdkafka's default message.timeout.ms

#: Settings every producer built here gets unless its configuration says otherwise.
#:
#: ``enable.sparse.connections``: with sparse connections (librdkafka's default) a producer
#: created while the broker does not answer only connects to the partition leaders when its
#: producer id timer (500 ms) next asks for one after the bootstrap connection came up: its
#: first delivery waits for that timer's next turn, up to 500 ms more after the broker answers
#: again.
#:
#: ``max.in.flight.requests.per.connection`` 1 (idempotence allows up to 5, the default): with
#: more than one, an idempotent producer whose broker answers slowly spins. ``perf`` on a
#: publisher of the fault drill's cluster without faults (40 instruments at 20 Hz, 8
#: partitions): 60 % of its CPU in one librdkafka broker thread polling with a zero timeout
#: (``poll``, ``clock_gettime``, ``rd_kafka_toppar_producer_serve``). Reproduced alone: 400
#: records/s against a broker stopped 80 ms in every 110, the producer used 40 % of a core at
#: 5 in flight and 3 % at 1 (and 4 % with idempotence off). In the drill's cluster each
#: publisher went from 10-23 % of a core to 8-11 %, and the machine's load average from 2-9 to
#: 2-5. One request at a time costs no throughput: what arrives meanwhile goes in the next
#: one (``bench/publishing/throughput.py``, same run: 24,860 quotes/s by two members against
#: 21,443 at 5 in flight).
PRODUCER_DEFAULTS: Mapping[str, ConfigValue] = {
    "enable.sparse.connections": False,
    "max.in.flight.requests.per.connection": 1,
}

#: Errors with which a broker rejects the producer id or epoch of an idempotent producer. A
#: transactional producer recovers from them by aborting (librdkafka says so); an idempotent one
#: without ``transactional.id`` never does against a broker that refuses its bumped epoch.
_EPOCH_REJECTIONS = frozenset(
    {
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
        KafkaError.UNKNOWN_PRODUCER_ID,
    }
)


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"true", "1", "yes", "on"}
    return bool(value)


def is_transactional(config: Mapping[str, object]) -> bool:
    """Whether a producer configuration sets ``transactional.id``."""
    return bool(config.get("transactional.id"))


def is_idempotent(config: Mapping[str, object]) -> bool:
    """Whether a producer configuration is idempotent (explicitly, or by being transactional)."""
    return _truthy(config.get("enable.idempotence", False)) or is_transactional(config)


def producer_is_wedged(err: KafkaError, *, idempotent: bool, transactional: bool) -> str | None:
    """Why a delivery error ends the producer that reported it, whatever ``fatal()`` says.

    Args:
        err: the error of a failed delivery (or a client error).
        idempotent: whether the producer has ``enable.idempotence`` (or a transactional.id).
        transactional: whether the producer has a ``transactional.id``.

    Returns:
        A short reason when the producer will never deliver again and must be replaced:
        any ``fatal()`` error; ``_MSG_TIMED_OUT`` on an idempotent producer (librdkafka bumps
        its epoch, which a broker may refuse forever); ``PRODUCER_FENCED``,
        ``INVALID_PRODUCER_EPOCH``, ``OUT_OF_ORDER_SEQUENCE_NUMBER`` or ``UNKNOWN_PRODUCER_ID``
        on one without ``transactional.id``. ``None`` for every other error.

    Examples:
        >>> timed_out = KafkaError(KafkaError._MSG_TIMED_OUT)
        >>> producer_is_wedged(timed_out, idempotent=True, transactional=False)
        '_MSG_TIMED_OUT on an idempotent producer (its epoch is bumped locally)'
        >>> producer_is_wedged(timed_out, idempotent=False, transactional=False) is None
        True
    """
    if err.fatal():
        return f"fatal error {err.name()}"
    code = err.code()
    if idempotent and code == KafkaError._MSG_TIMED_OUT:
        return f"{err.name()} on an idempotent producer (its epoch is bumped locally)"
    if idempotent and not transactional and code in _EPOCH_REJECTIONS:
        return f"{err.name()}: the broker rejects the producer's id or epoch"
    return None


class ProducerClient(Protocol):
    """The part of confluent-kafka's ``Producer`` a :class:`ReplaceableProducer` uses."""

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        """Queues one record (raises ``BufferError`` when the local queue is full)."""

    def poll(self, timeout: float) -> int:
        """Serves delivery callbacks."""

    def flush(self, timeout: float) -> int:
        """Waits for outstanding deliveries; returns how many are still queued."""

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fails every queued (and in-flight) record; their callbacks run on the next poll."""


P = TypeVar("P", bound=ProducerClient)


def _default_factory(logger: logging.Logger) -> Callable[[dict[str, ConfigValue]], Any]:
    def build(config: dict[str, ConfigValue]) -> Any:
        return Producer(config, logger=logger)

    return build


class ReplaceableProducer(Generic[P]):
    """A producer that is replaced, not waited on, once it is wedged (see the module docstring).

    Use it from the one thread that produces, polls and flushes (a worker thread, or the feed's
    loop): delivery callbacks run in that thread, inside :meth:`poll` and :meth:`flush`. Other
    threads may read :attr:`problem`, :attr:`replacements` and the counters.

    Args:
        config: the producer's configuration (plus :data:`PRODUCER_DEFAULTS` where it is
            silent); it decides whether the producer is idempotent.
        name: how log lines name the producer (e.g. its ``client.id``).
        logger: where the replacement and failure lines go; also the librdkafka logger of
            producers built by the default factory.
        factory: builds a producer from ``config`` (default: ``confluent_kafka.Producer``).
        on_replaced: called with the reason after each replacement, once the old producer's
            callbacks have run and the new producer is in place: the owner replays here.
        close_timeout_s: how long the old producer is flushed after its purge.
        report_interval_s: at least this long between two log lines about failures that do
            not end the producer.
        clock: a monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        config: Mapping[str, ConfigValue],
        *,
        name: str,
        logger: logging.Logger,
        factory: Callable[[dict[str, ConfigValue]], P] | None = None,
        on_replaced: Callable[[str], object] | None = None,
        close_timeout_s: float = 0.5,
        report_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Build the first producer."""
        self._config = {**PRODUCER_DEFAULTS, **config}
        self.name = name
        self._log = logger
        self._factory: Callable[[dict[str, ConfigValue]], P] = (
            factory if factory is not None else _default_factory(logger)
        )
        self.on_replaced = on_replaced
        self._close_timeout_s = close_timeout_s
        self._report_interval_s = report_interval_s
        self._clock = clock
        self.idempotent = is_idempotent(self._config)
        self.transactional = is_transactional(self._config)
        timeout_ms = self._config.get(
            "message.timeout.ms",
            self._config.get("delivery.timeout.ms", _LIBRDKAFKA_MESSAGE_TIMEOUT_MS),
        )
        self.message_timeout_s = float(timeout_ms) / 1000
        self.replacements = 0
        """How many times the producer was replaced."""
        self.delivered = 0
        """Records acknowledged (by any generation of the producer)."""
        self.failed = 0
        """Records whose delivery failed, purged ones included."""
        self.wedged: str | None = None
        """Why the current producer must be replaced, until :meth:`replace` runs."""
        self.recovered_at: float | None = None
        """Clock time of the last first delivery after a problem (a recovery)."""
        self._problem: str | None = None
        self._problem_since = 0.0
        self._generation = 0
        self._outstanding = 0  # records of the current generation not yet called back
        # The wrapper produce() made last, for which callback and generation: reused while
        # both are the same (a publisher's share passes one callback for all its records).
        self._wrapped: tuple[DeliveryCallback | None, int, DeliveryCallback] | None = None
        self._replaced_at: float | None = None
        self._delivered_before = 0  # self.delivered at the last replacement
        self._since_replacement: Counter[str] = Counter()
        self._unreported: Counter[str] = Counter()
        self._reported_at = float("-inf")
        self._producer: P = self._factory(dict(self._config))

    # -- state --------------------------------------------------------------------------------

    @property
    def producer(self) -> P:
        """The current producer (changes on replacement: do not keep it)."""
        return self._producer

    @property
    def problem(self) -> str | None:
        """Why the producer cannot deliver now (a readiness detail), or ``None``.

        Set by a failed delivery, a replacement or a flush that left records unacknowledged;
        cleared by the next acknowledged record of the current producer, or once nothing is
        outstanding and nothing has failed for a whole ``message.timeout.ms``.
        """
        return self._problem

    def classify(self, err: KafkaError) -> str | None:
        """:func:`producer_is_wedged` for this producer's configuration."""
        return producer_is_wedged(err, idempotent=self.idempotent, transactional=self.transactional)

    def _set_problem(self, problem: str) -> None:
        self._problem = problem
        self._problem_since = self._clock()

    # -- producing ----------------------------------------------------------------------------

    def produce(
        self, topic: str, *, on_delivery: DeliveryCallback | None = None, **kwargs: Any
    ) -> None:
        """Queue one record on the current producer (``Producer.produce``'s keywords).

        ``on_delivery`` runs after the error, if any, has been classified, so it may look at
        :attr:`wedged`.

        Raises:
            BufferError: the local queue is full (as ``Producer.produce``).
        """
        generation = self._generation
        wrapped = self._wrapped
        if wrapped is not None and wrapped[0] is on_delivery and wrapped[1] == generation:
            delivered = wrapped[2]
        else:

            def delivered(err: Any, msg: Any) -> None:
                self._settle(generation, err)
                if on_delivery is not None:
                    on_delivery(err, msg)

            self._wrapped = (on_delivery, generation, delivered)
        self._producer.produce(topic, on_delivery=delivered, **kwargs)
        self._outstanding += 1

    def _settle(self, generation: int, err: Any) -> None:
        current = generation == self._generation
        if current:
            self._outstanding -= 1
        if err is None:
            self.delivered += 1
            if current and self._problem is not None:
                self._recovered()
            return
        self.failed += 1
        name = err.name()
        self._since_replacement[name] += 1
        if not current:
            return  # purged or stale: its producer is already being replaced
        reason = self.classify(err)
        if reason is not None:
            if self.wedged is None:
                self.wedged = reason
        else:
            self._unreported[name] += 1
        self._set_problem(f"{name}: records not delivered")

    def _recovered(self) -> None:
        now = self._clock()
        self._problem = None
        self.recovered_at = now
        if self._replaced_at is not None:
            self._log.info(
                "%s: delivering again, %.2f s after replacement #%d",
                self.name,
                now - self._replaced_at,
                self.replacements,
            )
            self._replaced_at = None

    def poll(self, timeout: float = 0) -> int:
        """Serve delivery callbacks (``Producer.poll``)."""
        served = self._producer.poll(timeout)
        self._after_serving()
        return served

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for every record; return how many are still unacknowledged.

        Records still unacknowledged set :attr:`problem`.
        """
        remaining = self._producer.flush(timeout)
        if remaining:
            self._set_problem(f"{remaining} records unacknowledged after {timeout:g} s")
        self._after_serving()
        return remaining

    def _after_serving(self) -> None:
        now = self._clock()
        if (
            self._problem is not None
            and self._outstanding <= 0
            and now - self._problem_since >= self.message_timeout_s
        ):
            # Nothing to deliver and nothing failed for a whole delivery timeout: whatever
            # went wrong is over as far as this producer can tell.
            self._problem = None
        if self._unreported and now - self._reported_at >= self._report_interval_s:
            self._reported_at = now
            self._log.error(
                "%s: %d records not delivered (%s); the producer is kept",
                self.name,
                sum(self._unreported.values()),
                _counts(self._unreported),
            )
            self._unreported.clear()

    # -- replacing ----------------------------------------------------------------------------

    def mark_wedged(self, reason: str) -> None:
        """Have the producer replaced at the next :meth:`replace_if_wedged` (first reason wins)."""
        if self.wedged is None:
            self.wedged = reason

    def replace_if_wedged(self) -> str | None:
        """Replace the producer if a delivery said it is wedged; return the reason, or ``None``.

        Call it where the owner may lose its in-flight records (they are purged), never from a
        delivery callback.
        """
        reason = self.wedged
        if reason is not None:
            self.replace(reason)
        return reason

    def replace(self, reason: str) -> None:
        """Purge and close the current producer, build a new one, then call ``on_replaced``.

        The old producer's remaining delivery callbacks run (as failures) before this returns
        and before ``on_replaced``; they no longer count towards :attr:`wedged`.
        """
        old = self._producer
        self._generation += 1  # from here on, the old producer's callbacks are stale
        self._outstanding = 0
        old.purge(in_queue=True, in_flight=True, blocking=True)
        left = old.flush(self._close_timeout_s)
        self._producer = self._factory(dict(self._config))
        del old  # its last reference: librdkafka destroys the old client here
        self.replacements += 1
        self.wedged = None
        self._replaced_at = self._clock()
        self._set_problem(f"replaced after {reason}; no delivery since")
        self._log.error(
            "%s: producer replaced (#%d): %s; since the last replacement %d delivered, "
            "%d failed (%s)%s",
            self.name,
            self.replacements,
            reason,
            self.delivered - self._delivered_before,
            sum(self._since_replacement.values()),
            _counts(self._since_replacement) or "none",
            f"; {left} records dropped unreported with the old producer" if left else "",
        )
        self._delivered_before = self.delivered
        self._since_replacement.clear()
        self._unreported.clear()
        if self.on_replaced is not None:
            self.on_replaced(reason)

    def close(self, timeout: float) -> int:
        """Flush before the owner stops; return how many records are still unacknowledged."""
        return self.flush(timeout)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in counter.most_common())
