"""A subscriber client a Python user can use alone: bootstrap servers and a topic, nothing more.

:class:`PriceClient` reads ``prices`` (the relay's deduplicated output) and hands out typed
:class:`Price` objects as an async iterator::

    async with PriceClient("localhost:9092", "prices", instruments=["EURUSD"]) as client:
        async for price in client:
            print(price.instrument, price.seq, price.bid, price.ask)

What it does for the caller (docs/consuming.md):

* **read_committed** and **control records skipped**: the relay writes ``prices`` in
  transactions and puts control records beside the prices; a deposed relay's aborted records
  are never seen, control records (:func:`~pricing_ha.kafka.headers.is_control`) never handed
  out. Both are fixed settings, not options.
* **Instrument filters assign only their partitions**: an instrument lives on partition
  ``murmur2(symbol) mod M`` of every keyed topic (:mod:`pricing_ha.kafka.partitioning`), so a
  filter assigns those partitions only and drops other instruments sharing them.
* **The last price of each instrument on connect** (``last_values``), read back from the end of
  each partition (:mod:`._last_values`), flagged ``last_value=True``; then live prices.
* **Resume**: ``positions`` (partition -> next offset, as :meth:`PriceClient.positions`
  returned) or a ``group_id`` whose committed offsets are used (:meth:`PriceClient.commit`
  stores them). A partition with neither starts at its end.
* **Seq checks**: per instrument, each ``(epoch, seq)`` at most once and in order (the
  arbitration code the relay uses, :class:`~pricing_ha.dedupe.arbitration.Arbiter`, with no
  reorder window); a jump is reported to ``on_gap`` (a new epoch, a restarted feed, counts
  from seq 1), a copy at or below the last is dropped and counted in ``duplicates``. An
  operator's mark reset (a ``reset`` control record) restarts an instrument's check.
* **Staleness**: ``on_stale(instrument, silent_s)`` once per silence longer than
  ``stale_after_s``.

The consumer is never a member of a consumer group (partitions are assigned, not
subscribed): a ``group_id`` is used only to read and commit offsets. Every librdkafka call runs
on one thread of the client's own; callbacks run on the event loop, inside the iteration, and
should not block.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaError, Message, TopicPartition

from pricing_ha.dedupe.arbitration import Arbiter, Emission
from pricing_ha.dedupe.control import RESET, control_of
from pricing_ha.kafka.fetching import FETCH_WAIT_MS
from pricing_ha.publishing.pricing import InvalidPriceError, decode_price
from pricing_ha.subscribing._last_values import read_last_values
from pricing_ha.subscribing._reader import AssignedReader, fetch_batch, wanted_partitions
from pricing_ha.telemetry.ratelimited import RateLimitedWarnings

__all__ = ["Gap", "Price", "PriceClient"]

log = logging.getLogger("pricing_ha.client")

_WAIT_S = 0.1  # longest single poll: close() and staleness are seen this promptly
_WARN_INTERVAL_S = 10.0  # a broken topic repeats one problem per record: one line per interval

#: Settings the client fixes (a caller's ``settings`` may not change them).
FIXED_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
}


@dataclass(frozen=True, slots=True)
class Price:
    """One price from ``prices``: the fields of the wire contract's price
    (:class:`pricing_ha.wire.Price`), and where it was read.

    Attributes:
        instrument: the symbol (the record's key).
        seq: the source quote's sequence number (strictly increasing within an epoch).
        bid: the published bid.
        ask: the published ask.
        mid: the midpoint of bid and ask.
        source_time_ns: the source quote's time, Unix epoch nanoseconds.
        epoch: the feed's epoch (its start, Unix ms; 0: a feed without epochs).
        partition: the partition it was read from.
        offset: its offset there (resume after it with ``positions={partition: offset + 1}``).
        last_value: read back on connect as the instrument's last price, not live.
    """

    instrument: str
    seq: int
    bid: float
    ask: float
    mid: float
    source_time_ns: int
    epoch: int
    partition: int
    offset: int
    last_value: bool = False


@dataclass(frozen=True, slots=True)
class Gap:
    """Seqs of one instrument that were never delivered.

    Attributes:
        instrument: the instrument.
        missing: how many seqs are missing.
        before: the price delivered right after them.
    """

    instrument: str
    missing: int
    before: Price


def _consumer(conf: dict[str, Any]) -> Any:
    return Consumer(conf, logger=log)


class PriceClient(AssignedReader):
    """Typed prices from ``prices`` (see the module docstring).

    Args:
        bootstrap_servers: the brokers, e.g. ``"localhost:9092"``.
        topic: the relay's output topic.
        instruments: deliver only these (``None``: all), assigning only their partitions.
        settings: further librdkafka properties (security: ``security.protocol``,
            ``sasl.*``, ``ssl.*``); the ones in :data:`FIXED_SETTINGS` cannot be changed.
        positions: partition -> the next offset to read (resume); these partitions get no
            last values.
        group_id: read the committed offsets of this consumer group where ``positions`` has
            none, and commit to it with :meth:`commit`.
        last_values: first hand out the last price of each instrument on every partition that
            starts at its end.
        on_gap: called with each :class:`Gap`, before the price after it is handed out.
        on_stale: called with ``(instrument, silent_s)`` once per silence longer than
            ``stale_after_s`` (an instrument of the filter is silent from connect time).
        stale_after_s: the staleness bound (``None``: no staleness callbacks).
        connect_timeout_s: the bound on reaching the brokers and on each offset query.
        last_value_max_records: the longest read-back per partition for last values.
        consumer_factory: builds the consumer from its settings (unit tests pass a fake).
        clock: monotonic seconds (staleness).

    Raises:
        ValueError: if ``settings`` tries to change a fixed setting or holds ``group.id``, or
            the staleness bound is not positive.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = "prices",
        *,
        instruments: Iterable[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        positions: Mapping[int, int] | None = None,
        group_id: str | None = None,
        last_values: bool = True,
        on_gap: Callable[[Gap], object] | None = None,
        on_stale: Callable[[str, float], object] | None = None,
        stale_after_s: float | None = None,
        connect_timeout_s: float = 10.0,
        last_value_max_records: int = 131_072,
        consumer_factory: Callable[[dict[str, Any]], Any] = _consumer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Prepares the client; nothing connects until :meth:`start`."""
        super().__init__(thread_name="price-client")
        extra = dict(settings or {})
        for key, value in FIXED_SETTINGS.items():
            if key in extra and extra[key] != value:
                raise ValueError(f"setting {key!r} is fixed at {value!r} by the client")
        if "group.id" in extra:
            raise ValueError("pass the consumer group as group_id, not in settings")
        if stale_after_s is not None and stale_after_s <= 0:
            raise ValueError(f"stale_after_s must be > 0, got {stale_after_s}")
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.instruments = None if instruments is None else frozenset(instruments)
        self._keys = None if self.instruments is None else {i.encode() for i in self.instruments}
        self.group_id = group_id
        self._conf: dict[str, Any] = {
            "fetch.wait.max.ms": FETCH_WAIT_MS,  # no latency: a fetch returns on a record
            "log.connection.close": False,
            "auto.offset.reset": "earliest",  # a resume position lost to retention: the start
            **extra,
            **FIXED_SETTINGS,
            "bootstrap.servers": bootstrap_servers,
            # Never joined: assign() needs no group, librdkafka needs an id to commit with.
            "group.id": group_id or f"pricing-ha-subscriber-{uuid.uuid4().hex[:12]}",
        }
        self._start_positions = dict(positions or {})
        self._last_values = last_values
        self._on_gap = on_gap
        self._on_stale = on_stale
        self._stale_after_s = stale_after_s
        self._timeout_s = connect_timeout_s
        self._max_records = last_value_max_records
        self._factory = consumer_factory
        self._clock = clock
        self._warnings = RateLimitedWarnings(log, _WARN_INTERVAL_S, clock=clock)
        self._arbiter: Arbiter[Price] = Arbiter(0.0)  # in order already: a jump is a gap at once
        self._floor: dict[int, int] = {}  # partition -> first live offset (older: ignored)
        self._positions: dict[int, int] = {}
        self._pending: list[Price] = []  # last values, handed out first
        self._last_seen: dict[str, float] = {}
        self._stale: set[str] = set()
        self.assigned: tuple[int, ...] = ()
        self.duplicates = 0
        self.invalid = 0
        self.errors = 0

    async def start(self) -> None:
        """Connects, assigns the partitions needed and reads back the last values.

        Raises:
            BrokerUnavailableError: if no broker answers within ``connect_timeout_s``.
            TopicLayoutError: if the topic does not exist.
        """
        self._consumer = self._factory(dict(self._conf))
        count = await self._partition_count(self.topic, self.bootstrap_servers, self._timeout_s)
        wanted = wanted_partitions(self.instruments, count)
        self.assigned = tuple(sorted(wanted) if wanted is not None else range(count))
        starts = await self._call(self._resume_offsets)
        at_end = [p for p in self.assigned if starts[p] == OFFSET_END]
        if self._last_values and at_end:
            found = await self._call(
                lambda: read_last_values(
                    self._consumer,
                    self.topic,
                    at_end,
                    wanted,
                    max_records=self._max_records,
                    timeout_s=self._timeout_s,
                )
            )
            starts |= found.ends
            now = self._clock()
            for msg in found.records:
                self._offer(msg, now, self._pending, last_value=True)
        self._floor = {p: o for p, o in starts.items() if o >= 0}
        await self._call(
            self._consumer.assign, [TopicPartition(self.topic, p, starts[p]) for p in self.assigned]
        )
        now = self._clock()
        for name in self.instruments or ():
            self._last_seen.setdefault(name, now)
        log.info("assigned %s of %s (%d partitions)", list(self.assigned), self.topic, count)

    def _resume_offsets(self) -> dict[int, int]:
        """Partition -> where to start: ``positions``, else the group's commit, else the end."""
        starts = {p: self._start_positions.get(p, OFFSET_END) for p in self.assigned}
        ask = [p for p in self.assigned if p not in self._start_positions]
        if self.group_id is not None and ask:
            tps = [TopicPartition(self.topic, p) for p in ask]
            for tp in self._consumer.committed(tps, timeout=self._timeout_s):
                if tp.error is None and tp.offset >= 0:
                    starts[tp.partition] = tp.offset
        return starts

    def positions(self) -> dict[int, int]:
        """Partition -> the offset after the last price handed out (pass it back as
        ``positions`` to resume there)."""
        return dict(self._positions)

    async def commit(self) -> None:
        """Commits :meth:`positions` to ``group_id`` (synchronously, on the client's thread).

        Raises:
            ValueError: if the client has no ``group_id``.
        """
        if self.group_id is None:
            raise ValueError("commit() needs a group_id")
        offsets = [TopicPartition(self.topic, p, o) for p, o in self._positions.items()]
        if offsets and self._consumer is not None:
            await self._call(lambda: self._consumer.commit(offsets=offsets, asynchronous=False))

    def __aiter__(self) -> AsyncIterator[Price]:
        """Every price, until :meth:`close`."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Price]:
        while not self._closed:
            for price in await self._take(_WAIT_S):
                self._positions[price.partition] = price.offset + 1
                yield price

    async def poll(self, timeout_s: float = _WAIT_S) -> list[Price]:
        """Waits up to ``timeout_s`` for prices; returns those due (empty after close)."""
        prices = await self._take(timeout_s)
        for price in prices:
            self._positions[price.partition] = price.offset + 1
        return prices

    async def _take(self, timeout_s: float) -> list[Price]:
        if self._pending:
            out, self._pending = self._pending, []
            return out
        if self._consumer is None or self._closed:
            return []
        msgs = await self._call(fetch_batch, self._consumer, timeout_s)
        now = self._clock()
        out = []
        for msg in msgs:
            self._offer(msg, now, out)
        self._check_stale(now)
        return out

    def _offer(
        self, msg: Message, now: float, out: list[Price], *, last_value: bool = False
    ) -> None:
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                self.errors += 1
                self._warnings.warn("error", "consumer error on %s: %s", self.topic, err)
            return
        partition, offset = msg.partition() or 0, msg.offset() or 0
        if not last_value and offset < self._floor.get(partition, 0):
            return  # fetched before the assignment moved on (a read-back window)
        key = msg.key()
        control = control_of(msg)
        if control is not None:
            kind, values = control
            if kind == RESET:  # an operator reset the mark: restart this instrument's check
                self._arbiter.reset_mark(values.get("instrument", b"").decode(errors="replace"))
            return
        if self._keys is not None and key not in self._keys:
            return
        try:
            p = decode_price(msg.value())
        except InvalidPriceError as exc:
            self.invalid += 1
            self._warnings.warn(
                "undecodable", "undecodable price at %s/%s: %s", partition, offset, exc
            )
            return
        if key is not None and key != p.instrument.encode():
            self.invalid += 1
            self._warnings.warn(
                "key", "price of %s under key %r at %s/%s", p.instrument, key, partition, offset
            )
            return
        price = Price(
            p.instrument,
            p.seq,
            p.bid,
            p.ask,
            p.mid,
            p.source_time_ns,
            p.epoch,
            partition,
            offset,
            last_value,
        )
        dropped = self._arbiter.duplicates
        emissions = self._arbiter.offer(p.instrument, p.seq, price, "prices", now, epoch=p.epoch)
        if self._arbiter.duplicates != dropped:
            self.duplicates += 1
            self._warnings.warn(
                "duplicate",
                "duplicate of %s seq %d at %s/%s dropped",
                p.instrument,
                p.seq,
                partition,
                offset,
            )
        for e in emissions:
            self._emit(e, now, out)

    def _emit(self, e: Emission[Price], now: float, out: list[Price]) -> None:
        if e.gap_before and self._on_gap is not None:
            self._on_gap(Gap(e.instrument, e.gap_before, e.item))
        self._last_seen[e.instrument] = now
        self._stale.discard(e.instrument)
        out.append(e.item)

    def _check_stale(self, now: float) -> None:
        bound, callback = self._stale_after_s, self._on_stale
        if bound is None or callback is None:
            return
        for name, seen in self._last_seen.items():
            if now - seen > bound and name not in self._stale:
                self._stale.add(name)
                callback(name, now - seen)
