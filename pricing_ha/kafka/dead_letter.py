"""Dead letters: the one rule for a record a role cannot use, and for the fate of its copy.

Every role that rejects a record (the publisher: ``md.quotes`` -> ``md.quotes.dlq``; the relay:
``prices.raw`` -> ``prices.raw.dlq``) builds its dead letter with :func:`build_dead_letter` and
sends it through :class:`DeadLetters`.

**The record.** Key and value are the original's, capped: the value at
:data:`PAYLOAD_CAP_BYTES` (64 KiB), the key at :data:`KEY_CAP_BYTES` (1 KiB). Headers:

* ``reason``: why, UTF-8, at most :data:`MAX_REASON_BYTES` (256) bytes, cut at a character
  boundary (a cut ends in "…"); a reason quoting the offending field cannot grow with it;
* ``source.topic``, ``source.partition``, ``source.offset``: where the original is;
* ``original.key.size``, ``original.value.size`` (bytes) and ``truncated`` (``true`` when the
  key or the value was cut);
* the role's identity (the publisher's ``group`` and ``member``, the relay's ``relay``).

A dead letter is therefore at most about 66 KiB whatever the original's size: fifteen times
below librdkafka's default ``message.max.bytes`` (1,000,000) and the broker's default
``max.message.bytes`` (1,048,588). A 600 KB record cannot make a dead letter the producer or
the broker refuses (it did: the reason repeated the field, and the copy was twice the record).

**Its fate** (:class:`DeadLetters`), decided for every failed delivery or produce call:

* refused for its size (``MSG_SIZE_TOO_LARGE``, ``RECORD_LIST_TOO_LARGE``: a DLQ topic with a
  smaller ``max.message.bytes``): sent again at once with the next smaller cap in
  :data:`SHRINKING_CAPS` (4 KiB, 256 B, then no payload);
* retriable (timed out, no leader, not enough replicas, local queue full, ...): sent again
  after a backoff (:data:`FIRST_BACKOFF_S` doubling up to :data:`MAX_BACKOFF_S`), at most
  :data:`MAX_ATTEMPTS` attempts in all;
* permanent (not authorized, unknown topic or partition, ...) or out of attempts: counted in
  :attr:`DeadLetterStats.lost`, reported by one rate-limited line, and settled all the same.

Settled means the input may move past the original: the sender's ``on_settled`` runs (the
publisher counts its batch down), and :meth:`DeadLetters.floor` no longer holds the source
partition's commits back (the relay commits by offset). A dead letter that cannot be written
costs its forensic copy, never the partition: the input offset always advances.

Dead letters go through a producer of their own (built at the first one), never through a
role's price producer: a DLQ that refuses records must not fail, replay or wedge prices. It is
not idempotent: a dead letter sent again may land twice (readers dedupe by source position).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from pricing_ha.kafka.headers import HeaderValue
from pricing_ha.kafka.producers import ConfigValue, ProducerClient
from pricing_ha.kafka.replay_backoff import TRANSIENT_ERRORS

__all__ = [
    "FIRST_BACKOFF_S",
    "KEY_CAP_BYTES",
    "MAX_ATTEMPTS",
    "MAX_BACKOFF_S",
    "MAX_REASON_BYTES",
    "PAYLOAD_CAP_BYTES",
    "SHRINKING_CAPS",
    "DeadLetter",
    "DeadLetterStats",
    "DeadLetters",
    "bounded_reason",
    "build_dead_letter",
    "failure_kind",
]

MAX_REASON_BYTES = 256
"""Most bytes of a dead letter's ``reason`` header (UTF-8)."""
PAYLOAD_CAP_BYTES = 64 * 1024
"""Most bytes of the original value a dead letter carries (see the module docstring)."""
KEY_CAP_BYTES = 1024
"""Most bytes of the original key a dead letter carries (instruments have at most 64 chars)."""
SHRINKING_CAPS = (PAYLOAD_CAP_BYTES, 4096, 256, 0)
"""The value caps tried in turn when a dead letter is refused for its size."""
MAX_ATTEMPTS = 5
"""Most attempts at a dead letter failing with retriable errors before it is given up."""
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 5.0
_REPORT_INTERVAL_S = 10.0

_ELLIPSIS = "…".encode()

_SIZE_ERRORS = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


def bounded_reason(reason: str, limit: int = MAX_REASON_BYTES) -> bytes:
    """``reason`` as UTF-8 of at most ``limit`` bytes, cut at a character boundary ("…" ends a
    cut one). Characters UTF-8 cannot encode (lone surrogates) are escaped, never raised on."""
    data = reason.encode("utf-8", "backslashreplace")
    if len(data) <= limit:
        return data
    cut = data[: max(0, limit - len(_ELLIPSIS))]
    # Decoding with "ignore" drops a trailing partial character (and nothing else: the bytes
    # were valid UTF-8 up to the cut).
    return cut.decode("utf-8", "ignore").encode() + _ELLIPSIS[: limit - len(cut)]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead-letter record, ready to produce.

    Attributes:
        key: the original key, capped (``None`` if it had none).
        value: the original value, capped (``None`` if it had none).
        headers: reason, source position, original sizes, truncation flag, identity.
        truncated: whether the key or the value was cut.
    """

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, HeaderValue]]
    truncated: bool


def _as_bytes(data: HeaderValue) -> bytes | None:
    if data is None:
        return None
    return data.encode("utf-8", "backslashreplace") if isinstance(data, str) else bytes(data)


def build_dead_letter(
    *,
    reason: str,
    source_topic: str,
    source_partition: int,
    source_offset: int,
    key: str | bytes | None,
    value: str | bytes | None,
    identity: Sequence[tuple[str, bytes]] = (),
    value_cap: int = PAYLOAD_CAP_BYTES,
) -> DeadLetter:
    """The dead letter of one record (see the module docstring for its layout and bounds)."""
    raw_key, raw_value = _as_bytes(key), _as_bytes(value)
    key_size = -1 if raw_key is None else len(raw_key)
    value_size = -1 if raw_value is None else len(raw_value)
    out_key = None if raw_key is None else raw_key[:KEY_CAP_BYTES]
    out_value = None if raw_value is None else raw_value[: max(0, value_cap)]
    truncated = key_size > KEY_CAP_BYTES or value_size > max(0, value_cap)
    headers: list[tuple[str, HeaderValue]] = [
        ("reason", bounded_reason(reason)),
        ("source.topic", source_topic.encode()),
        ("source.partition", str(source_partition).encode()),
        ("source.offset", str(source_offset).encode()),
        ("original.key.size", str(key_size).encode()),
        ("original.value.size", str(value_size).encode()),
        ("truncated", b"true" if truncated else b"false"),
        *identity,
    ]
    return DeadLetter(out_key, out_value, headers, truncated)


def failure_kind(err: Any) -> str:
    """``"size"``, ``"retriable"`` or ``"permanent"``: what a failed dead letter does next.

    Args:
        err: a ``KafkaError`` (from a delivery report or a ``KafkaException``), or anything
            quacking like one.
    """
    code = err.code()
    if code in _SIZE_ERRORS:
        return "size"
    if code in TRANSIENT_ERRORS or err.retriable():
        return "retriable"
    return "permanent"


@dataclass
class DeadLetterStats:
    """What happened to a role's dead letters (read by tests, status and logs)."""

    sent: int = 0  # dead letters asked for
    delivered: int = 0
    shrunk: int = 0  # sent again with a smaller payload after a size refusal
    retried: int = 0  # sent again after a retriable failure
    lost: int = 0  # given up (permanent error or out of attempts): settled unwritten


@dataclass(slots=True, eq=False)
class _Letter:
    """One dead letter until it is settled."""

    partition: int
    offset: int
    key: str | bytes | None
    value: str | bytes | None
    reason: str
    on_settled: Callable[[], object] | None
    attempts: int = 0
    cap: int = 0  # index into SHRINKING_CAPS
    due: float = 0.0


class DeadLetters:
    """Sends a role's dead letters and decides each one's fate (see the module docstring).

    Use it from the one thread that consumes (the worker thread): callbacks run inside
    :meth:`poll` and :meth:`flush`.

    Args:
        config: the dead-letter producer's settings (made non-idempotent here).
        topic: the dead-letter topic.
        source_topic: the topic the originals come from.
        identity: headers naming the role's process, added to every dead letter.
        logger: where the rate-limited lines go (and the producer's librdkafka log).
        factory: builds the producer (default: ``confluent_kafka.Producer``); called at the
            first dead letter.
        clock: a monotonic clock (injectable for tests).
        sleep: how :meth:`flush` waits for a retry to fall due (injectable for tests).
    """

    def __init__(
        self,
        config: Mapping[str, ConfigValue],
        *,
        topic: str,
        source_topic: str,
        identity: Sequence[tuple[str, bytes]] = (),
        logger: logging.Logger,
        factory: Callable[[dict[str, ConfigValue]], ProducerClient] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        """Nothing is built until the first dead letter."""
        self._config: dict[str, ConfigValue] = {
            **config,
            "enable.idempotence": False,
            "acks": "all",
        }
        self.topic = topic
        self.source_topic = source_topic
        self._identity = list(identity)
        self._factory = factory or (lambda c: Producer(c, logger=logger))
        self._producer: ProducerClient | None = None
        self._clock = clock
        self._sleep = sleep
        self._unsettled: dict[int, _Letter] = {}
        self._retry: list[_Letter] = []
        self.stats = DeadLetterStats()
        self._log = logger
        # Lost dead letters: one line per _REPORT_INTERVAL_S at most (a flood of them must not
        # become a flood of lines), saying how many there were since the last.
        self._reported_at = float("-inf")
        self._unreported = 0

    # -- state --------------------------------------------------------------------------------

    @property
    def outstanding(self) -> int:
        """Dead letters not settled yet (in flight or waiting to be sent again)."""
        return len(self._unsettled)

    def floor(self, partition: int) -> int | None:
        """The lowest source offset of ``partition`` whose dead letter is not settled (its
        input must not be committed past it), or ``None``."""
        offsets = [x.offset for x in self._unsettled.values() if x.partition == partition]
        return min(offsets) if offsets else None

    # -- sending ------------------------------------------------------------------------------

    def send(
        self,
        *,
        partition: int,
        offset: int,
        key: str | bytes | None,
        value: str | bytes | None,
        reason: str,
        on_settled: Callable[[], object] | None = None,
    ) -> None:
        """Dead-letter the record at ``offset`` of ``partition`` of the source topic.

        Never raises for a record: ``on_settled`` runs once its fate is decided (at once if
        it is given up at once).
        """
        letter = _Letter(partition, offset, key, value, reason, on_settled)
        self.stats.sent += 1
        self._unsettled[id(letter)] = letter
        self._attempt(letter)

    def _attempt(self, letter: _Letter) -> None:
        letter.attempts += 1
        record = build_dead_letter(
            reason=letter.reason,
            source_topic=self.source_topic,
            source_partition=letter.partition,
            source_offset=letter.offset,
            key=letter.key,
            value=letter.value,
            identity=self._identity,
            value_cap=SHRINKING_CAPS[letter.cap],
        )
        if self._producer is None:
            self._producer = self._factory(dict(self._config))

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is None:
                self.stats.delivered += 1
                self._settle(letter)
            else:
                self._failed(letter, err)

        try:
            self._producer.produce(
                self.topic,
                key=record.key,
                value=record.value,
                partition=letter.partition,
                headers=record.headers,
                on_delivery=delivered,
            )
        except BufferError:
            self._failed(letter, KafkaError(KafkaError._QUEUE_FULL))
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            self._failed(letter, err or KafkaError(KafkaError._FAIL))

    def _failed(self, letter: _Letter, err: Any) -> None:
        kind = failure_kind(err)
        if kind == "size" and letter.cap + 1 < len(SHRINKING_CAPS):
            letter.cap += 1
            self.stats.shrunk += 1
            letter.due = self._clock()
            self._retry.append(letter)
            return
        if kind == "retriable" and letter.attempts < MAX_ATTEMPTS:
            self.stats.retried += 1
            backoff = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (letter.attempts - 1))
            letter.due = self._clock() + backoff
            self._retry.append(letter)
            return
        self.stats.lost += 1
        self._report_lost(letter, err)
        self._settle(letter)

    def _report_lost(self, letter: _Letter, err: Any) -> None:
        now = self._clock()
        if now - self._reported_at < _REPORT_INTERVAL_S:
            self._unreported += 1
            return
        self._log.error(
            "dead letter of %s[%d]@%d to %s given up after %d attempt(s): %s; the input moves "
            "on (%d more given up since the last such line, %d in all)",
            self.source_topic,
            letter.partition,
            letter.offset,
            self.topic,
            letter.attempts,
            err.name(),
            self._unreported,
            self.stats.lost,
        )
        self._reported_at = now
        self._unreported = 0

    def _settle(self, letter: _Letter) -> None:
        if self._unsettled.pop(id(letter), None) is None:
            return
        if letter.on_settled is not None:
            letter.on_settled()

    def _resend_due(self) -> None:
        if not self._retry:
            return
        now = self._clock()
        due = [x for x in self._retry if x.due <= now]
        if due:
            self._retry = [x for x in self._retry if x.due > now]
            for letter in due:
                self._attempt(letter)

    # -- serving ------------------------------------------------------------------------------

    def poll(self) -> None:
        """Serve delivery reports and send again what is due (never waits)."""
        if self._producer is not None:
            self._producer.poll(0)
        self._resend_due()

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every dead letter to be settled (sending again what
        falls due meanwhile); return how many are not."""
        deadline = self._clock() + timeout_s
        while self._unsettled and self._producer is not None:
            left = deadline - self._clock()
            if left <= 0:
                break
            if self._producer.flush(min(left, 0.05)) == 0 and self._retry:
                # Nothing in flight: wait for the next retry to fall due (not a busy loop).
                wait = min(x.due for x in self._retry) - self._clock()
                if wait > 0:
                    self._sleep(min(wait, left))
            self._resend_due()
        return len(self._unsettled)

    def close(self, timeout_s: float) -> int:
        """Flush before the role stops; return how many dead letters are not settled."""
        return self.flush(timeout_s)
