"""The relay's hot standby: every partition of ``prices``, tailed continuously.

A relay member keeps, for *every* partition of ``prices`` (owned or not), each instrument's
highest seq and the partition's last control records, by reading the topic as it grows. Taking a
partition over then costs a short read (from where the tail is to the new owner's takeover
marker), not a scan of the partition from its start: the cost does not grow with retention or
backlog, and a FENCED -> RESUMED flap with nothing changed costs one marker round trip.

Control records (:data:`~pricing_ha.kafka.headers.CONTROL_HEADER`) on ``prices[k]``:

* ``takeover``: a relay is about to emit on k. Its offset is that owner's *term*; everything
  appended before it is below it, so reading up to it yields complete high-water marks.
* ``release``: the owner of term t stopped emitting on k and every record it produced there was
  acknowledged before this record was written (header ``term`` = t).
* ``probe``: a relay assigned k, still in its grace period, asking what the end looks like.

:class:`Snapshot` is the state of a partition just *before* one of this member's own control
records (recognised by the ``marker`` header this member's token starts), captured by the tail
as it passes the record: what a takeover starts from, and whether the partition was *cleanly
released* (the owner of the latest term released it, and nothing but control records came
after): then no earlier owner can still append, and the new owner need not wait out its grace.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from pricing_ha.kafka.headers import CONTROL_HEADER, Headers, header_list
from pricing_ha.publishing.pricing import InvalidPriceError, decode_price

__all__ = ["PartitionView", "Snapshot", "StandbyTail", "control_kind"]

log = logging.getLogger("pricing_ha.relay")

TAKEOVER = b"takeover"
RELEASE = b"release"
PROBE = b"probe"
_CAPTURES_KEPT = 64  # own markers remembered per partition (each is consumed at once)


class _Reader(Protocol):
    def assign(self, partitions: list[TopicPartition]) -> None: ...
    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A partition's state just before one of this member's control records.

    Attributes:
        offset: the control record's offset.
        high: every instrument's highest seq below ``offset``.
        clean: the partition was cleanly released below ``offset`` (see the module docstring),
            or never had an owner.
    """

    offset: int
    high: dict[str, int]
    clean: bool


@dataclass(slots=True)
class PartitionView:
    """What the tail knows about one partition of ``prices``."""

    position: int = 0  # the next offset to read
    high: dict[str, int] = field(default_factory=dict)
    last_data: int = -1  # offset of the last price
    term: int = -1  # offset of the last takeover marker
    released_term: int = -1  # the term named by the last release marker
    released_at: int = -1  # offset of the last release marker
    requested_at: int = -1  # offset of the last probe or takeover by another member
    at_end: bool = False  # reached the end of the partition at least once
    end_mono: float = float("-inf")  # when the tail last reached the end (monotonic)

    @property
    def clean(self) -> bool:
        """Released by the owner of the latest term, with no price after the release."""
        if self.term < 0 and self.last_data < 0:
            return True  # never owned
        return self.released_term == self.term and self.released_at > self.last_data


def control_kind(headers: Headers) -> tuple[bytes, dict[str, bytes]] | None:
    """``(kind, headers)`` of a control record, or ``None`` for a price."""
    pairs = header_list(headers)
    if not any(name == CONTROL_HEADER for name, _ in pairs):
        return None
    values = {k: v.encode() if isinstance(v, str) else (v or b"") for k, v in pairs}
    return values[CONTROL_HEADER], values


def _seq_of(msg: Message, headers: Headers) -> tuple[str, int] | None:
    """Instrument and seq of a price on ``prices`` (its ``seq`` header, else its value)."""
    key = msg.key()
    if not isinstance(key, bytes):
        return None
    for name, value in header_list(headers):
        if name == "seq" and value:
            raw = value.decode() if isinstance(value, bytes) else value
            if raw.isdigit():
                return key.decode(errors="replace"), int(raw)
    try:
        price = decode_price(msg.value() or b"")
    except InvalidPriceError:
        return None
    return price.instrument, price.seq


class StandbyTail:
    """Tails every partition of ``topic`` in a thread of its own (see the module docstring).

    Args:
        settings: the tail consumer's configuration (a throwaway group id; nothing committed).
        topic: ``prices``.
        partitions: the topic's partition count.
        token: the prefix of the ``marker`` header of this member's own control records.
        reader: builds the consumer (tests and the simulation pass a fake).
    """

    def __init__(
        self,
        settings: dict[str, Any],
        topic: str,
        partitions: int,
        token: str,
        *,
        reader: Callable[[dict[str, Any]], _Reader] | None = None,
    ) -> None:
        """Create the tail; nothing is read until :meth:`start` (or :meth:`step`)."""
        self._settings = {**settings, "enable.partition.eof": True}
        self._topic = topic
        self._token = token.encode()
        self._make = reader or (lambda s: Consumer(s, logger=log))
        self._reader: _Reader | None = None
        self.views = [PartitionView() for _ in range(partitions)]
        self._captures: list[dict[int, Snapshot]] = [{} for _ in range(partitions)]
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relay-standby", daemon=True)
        #: Records read, for the standby's cost.
        self.records = 0
        self.error: BaseException | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Create the consumer and assign every partition from its start."""
        reader = self._make(self._settings)
        reader.assign(
            [TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in range(len(self.views))]
        )
        self._reader = reader

    def start(self) -> None:
        """Open, then tail in the background."""
        self.open()
        self._thread.start()

    def close(self) -> None:
        """Stop tailing and close the consumer."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.step(0.05)
        except BaseException as exc:
            self.error = exc
            log.exception("the standby tail of %s failed", self._topic)
            with self._changed:
                self._changed.notify_all()

    # -- reading ------------------------------------------------------------------------------

    def step(self, timeout_s: float) -> int:
        """Read one batch and apply it; returns how many records it held."""
        assert self._reader is not None, "open() first"
        # consume(n, timeout) waits for n records or the whole timeout: wait for one, then
        # take what has already arrived, so that a marker is seen as soon as it lands.
        batch = self._reader.consume(1, timeout_s)
        if not batch:
            return 0
        batch += self._reader.consume(999, 0)
        with self._changed:
            for msg in batch:
                self._apply(msg)
            self._changed.notify_all()
        return len(batch)

    def _apply(self, msg: Message) -> None:
        partition, offset = msg.partition(), msg.offset()
        if partition is None or not 0 <= partition < len(self.views):
            return
        view = self.views[partition]
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                view.at_end = True
                view.end_mono = time.monotonic()
            return
        if offset is None or offset < view.position:
            return  # read again after a reset: already applied
        self.records += 1
        view.position = offset + 1
        headers = msg.headers()
        control = control_kind(headers)
        if control is None:
            got = _seq_of(msg, headers)
            if got is not None:
                instrument, seq = got
                if seq > view.high.get(instrument, 0):
                    view.high[instrument] = seq
            view.last_data = offset
            return
        kind, values = control
        if values.get("marker", b"").startswith(self._token):
            captures = self._captures[partition]
            captures[offset] = Snapshot(offset, dict(view.high), view.clean)
            if len(captures) > _CAPTURES_KEPT:
                del captures[min(captures)]
        elif kind in (TAKEOVER, PROBE):
            view.requested_at = offset
        if kind == TAKEOVER:
            view.term = offset
        elif kind == RELEASE:
            term = values.get("term", b"")
            view.released_term = int(term) if term.isdigit() else -2
            view.released_at = offset

    # -- queries (any thread) -----------------------------------------------------------------

    def snapshot_at(self, partition: int, offset: int, timeout_s: float) -> Snapshot | None:
        """The state just before this member's control record at ``offset`` on ``partition``.

        Waits (up to ``timeout_s``) for the tail to read that far; ``None`` if it did not.
        """
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                snap = self._captures[partition].pop(offset, None)
                if snap is not None:
                    return snap
                left = deadline - time.monotonic()
                if left <= 0 or self.error is not None:
                    return None
                if self.views[partition].position > offset:
                    return None  # passed without recognising it: not ours
                self._changed.wait(min(left, 0.05))

    def clean_after(self, partition: int, offset: int) -> bool:
        """Whether the tail has read past ``offset`` and finds ``partition`` cleanly released."""
        with self._changed:
            view = self.views[partition]
            return view.position > offset and view.clean

    def wait_clean(self, marks: dict[int, int], timeout_s: float) -> bool:
        """Wait (up to ``timeout_s``) until every partition in ``marks`` is :meth:`clean_after`
        its offset there; returns whether they all were."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                if all(
                    self.views[p].position > offset and self.views[p].clean
                    for p, offset in marks.items()
                ):
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self.error is not None:
                    return False
                self._changed.wait(min(left, 0.05))

    def unrequested_within(
        self,
        partition: int,
        offset: int,
        fresh_s: float,
        read_as_of: Callable[[int, int], float] | None = None,
    ) -> bool:
        """Nobody asked for ``partition`` after ``offset``, as of a read that saw everything
        appended to it until at most ``fresh_s`` ago (a stale tail could have missed the
        request: then ``False``).

        The tail knows it saw everything appended until the last time it reached the end (an
        end-of-partition event). While the partition is written continuously, those events can
        be rare (the embedded broker's reported end lags its data), so the owner may also pass
        ``read_as_of(partition, position)``: a monotonic time before which everything appended
        is below ``position`` (for instance, when the owner produced a record the broker put
        below it: every earlier request was appended before that record).
        """
        with self._changed:
            view = self.views[partition]
            fresh = view.end_mono
            if read_as_of is not None:
                fresh = max(fresh, read_as_of(partition, view.position))
            return view.requested_at <= offset and time.monotonic() - fresh < fresh_s

    def caught_up(self, partition: int) -> bool:
        """Whether the tail has reached the end of ``partition`` at least once (a member that
        just joined reads the partition's history first)."""
        with self._changed:
            return self.views[partition].at_end

    def requested_after(self, partition: int, offset: int) -> bool:
        """Whether someone asked for ``partition`` (a probe or takeover marker) after ``offset``,
        as far as the tail has read."""
        with self._changed:
            return self.views[partition].requested_at > offset

    def problem(self) -> str | None:
        """Why the standby is not ready (not yet at the end of every partition), or ``None``."""
        if self.error is not None:
            return f"the standby tail of {self._topic} failed: {self.error!r}"
        behind = [p for p, view in enumerate(self.views) if not view.at_end]
        if behind:
            return f"the standby tail of {self._topic} is catching up on partitions {behind}"
        return None
