"""Where dedupe happens: the relay (``pricing-ha dedupe``) writes ``prices`` from ``prices.raw``.

Ownership of a partition is **exclusive** (at most one relay emits for it at any instant): the
relay runs the fast NELI variant in exclusive mode on the NELI topic, in group ``pricing.relay``.
That gives own-heartbeat fencing, a grace period T after every new assignment, and the stall
guard that stops a relay which was paused (SIGSTOP) from emitting when it wakes up. Leadership is
checked for every record at the moment it is produced.

A relay that wakes up from a pause may still hold output it queued before the pause; the output
producer's ``message.timeout.ms`` (S / 2) makes librdkafka expire such records instead of sending
them, because the next owner cannot start before S + T after the pause began.

On taking over partition k the relay rebuilds each instrument's high-water mark by reading
``prices[k]`` itself to its end (found by consuming until idle: no watermarks, no time look-ups,
no LogAppendTime), so no seq is emitted twice across a fail-over. It then consumes
``prices.raw[k]`` from its group's committed position, arbitrates (:mod:`pricing_ha.arbitration`)
and commits the input position only once the output is acknowledged and nothing before it is
still held in the reorder window. Malformed raw records go to the raw dead-letter topic.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from neli import Mode, Neli, Variant
from neli import NeliConfig as LibNeliConfig
from pricing_ha.arbitration import Arbiter, Emission
from pricing_ha.config import AppConfig
from pricing_ha.kafka_headers import HeaderValue, header_dict, header_list
from pricing_ha.partition_worker import FLUSH_TIMEOUT_S, PartitionWorker, WorkerMember, serve
from pricing_ha.pricing import InvalidPriceError, decode_price

log = logging.getLogger("pricing_ha.relay")

DEFAULT_GROUP = "relay"


def relay_group_id(group: str) -> str:
    """The NELI consumer group of relay group ``group`` (``pricing.relay`` by default)."""
    return f"pricing.{group}"


def raw_group_id(group: str) -> str:
    """The consumer group holding relay group ``group``'s committed ``prices.raw`` positions."""
    return f"pricing.{group}.raw"


_REBUILD_IDLE_S = 0.5
_REBUILD_EMPTY_S = 2.0  # how long an apparently empty partition is watched before trusting it


@dataclass(frozen=True, slots=True)
class RawPrice:
    """One record of ``prices.raw`` as the relay keeps it."""

    offset: int
    key: bytes
    value: bytes
    headers: list[tuple[str, HeaderValue]]


@dataclass
class RelayStats:
    """Counters of one relay member."""

    relayed: int = 0
    dead_lettered: int = 0
    not_leader_skips: int = 0
    takeovers: int = 0
    rebuild_s: list[float] = field(default_factory=list)
    switches: int = 0


def parse_raw(msg: Message) -> tuple[str, int, str]:
    """Instrument, seq and source (``group/member``) of a raw price.

    Raises:
        InvalidPriceError: the record is not a valid price.
    """
    key, value = msg.key(), msg.value()
    if not isinstance(key, bytes) or not isinstance(value, bytes):
        raise InvalidPriceError("missing key or value")
    price = decode_price(value)
    try:
        instrument = key.decode()
    except UnicodeDecodeError as exc:
        raise InvalidPriceError("key is not UTF-8") from exc
    if instrument != price.instrument:
        raise InvalidPriceError(f"key {instrument!r} differs from instrument {price.instrument!r}")
    headers = header_dict(msg.headers())
    return instrument, price.seq, f"{headers.get('group', '?')}/{headers.get('member', '?')}"


def _bytes(data: HeaderValue) -> bytes:
    return data.encode() if isinstance(data, str) else (data or b"")


def _headers(msg: Message) -> list[tuple[str, HeaderValue]]:
    return header_list(msg.headers())


class _RelayWorker(PartitionWorker):
    def __init__(
        self,
        cfg: AppConfig,
        group: str,
        member: str,
        leads: Callable[[int], bool],
        stats: RelayStats,
    ) -> None:
        broker = cfg.broker
        base = {"fetch.wait.max.ms": 10, "log.connection.close": False}
        super().__init__(
            "relay",
            Consumer(
                broker.client_config(
                    defaults=base,
                    required={
                        "group.id": raw_group_id(group),
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        "auto.offset.reset": "earliest",
                        "client.id": f"relay-{member}-raw",
                    },
                ),
                logger=log,
            ),
        )
        self._cfg = cfg
        self._member = member
        self._leads = leads
        self.stats = stats
        self._window_s = cfg.relay.reorder_window_ms / 1000
        self._arbiters: dict[int, Arbiter[RawPrice]] = {}
        self._scan_settings = broker.client_config(
            defaults=base,
            required={"group.id": f"relay-scan-{uuid.uuid4().hex}", "enable.auto.commit": False},
        )
        self._producer = Producer(
            broker.client_config(
                defaults={"linger.ms": 1, "log.connection.close": False},
                required={
                    "acks": "all",
                    "enable.idempotence": True,
                    "client.id": f"relay-{member}-prices",
                    # Output queued before a pause must expire, not land after a takeover.
                    "message.timeout.ms": max(500, cfg.relay.session_timeout_ms // 2),
                },
            ),
            logger=log,
        )

    # -- ownership ----------------------------------------------------------------------------

    def assign(self, partition: int) -> None:
        """Rebuild high-water marks from ``prices[k]``, then consume ``prices.raw[k]``."""
        t0 = time.monotonic()
        arbiter: Arbiter[RawPrice] = Arbiter(self._window_s)
        for instrument, seq in self._rebuild(partition).items():
            arbiter.set_high_water(instrument, seq)
        self._arbiters[partition] = arbiter
        raw = TopicPartition(self._cfg.topics.raw, partition, OFFSET_INVALID)
        self.consumer.incremental_assign([raw])
        self.stats.takeovers += 1
        self.stats.rebuild_s.append(time.monotonic() - t0)
        log.info("relay took partition %d (rebuilt in %.3f s)", partition, time.monotonic() - t0)

    def _rebuild(self, partition: int) -> dict[str, int]:
        """Every instrument's highest seq on ``prices[partition]``, read to the end.

        The end is where nothing new arrives for a while: nobody else emits on this partition
        (exclusive ownership), so the partition is quiescent. The broker's high watermark is
        only used as a lower bound of the end (it can be stale on some brokers), and the idle
        clock starts after the first fetch has had time to complete.
        """
        scan = Consumer(self._scan_settings, logger=log)
        high: dict[str, int] = {}
        tp = TopicPartition(self._cfg.topics.prices, partition, OFFSET_BEGINNING)
        try:
            try:
                _, end_hint = scan.get_watermark_offsets(tp, timeout=5.0, cached=False)
            except KafkaException:
                end_hint = 0
            scan.assign([tp])
            started = last_data = time.monotonic()
            next_offset = 0
            while True:
                now = time.monotonic()
                idle = now - last_data
                if (
                    next_offset >= end_hint
                    and idle >= _REBUILD_IDLE_S
                    and (next_offset > 0 or now - started >= _REBUILD_EMPTY_S)
                ):
                    break
                for msg in scan.consume(1000, 0.05):
                    last_data = time.monotonic()
                    offset = msg.offset()
                    if msg.error() is not None or offset is None:
                        continue
                    next_offset = max(next_offset, offset + 1)
                    try:
                        instrument, seq, _ = parse_raw(msg)
                    except InvalidPriceError:
                        continue
                    if seq > high.get(instrument, 0):
                        high[instrument] = seq
        finally:
            scan.close()
        return high

    def unassign(self, partition: int) -> None:
        """Stop consuming ``prices.raw[k]``; held records are re-read by the next owner."""
        raw = TopicPartition(self._cfg.topics.raw, partition)
        self.consumer.incremental_unassign([raw])
        self._arbiters.pop(partition, None)

    def close_clients(self) -> None:
        """Flush output, then close the input consumer."""
        self._producer.flush(FLUSH_TIMEOUT_S)
        self.consumer.close()

    # -- the hot path -------------------------------------------------------------------------

    def process(self, batch: list[Message]) -> None:
        """Arbitrate a batch, emit, flush, commit what is safe to commit."""
        now = time.monotonic()
        last: dict[int, int] = {}
        lost: set[int] = set()
        for msg in batch:
            partition, offset = msg.partition(), msg.offset()
            if msg.error() is not None or partition is None or offset is None:
                continue
            arbiter = self._arbiters.get(partition)
            if arbiter is None or partition in lost:
                continue
            try:
                instrument, seq, source = parse_raw(msg)
            except InvalidPriceError as exc:
                self._dead_letter(msg, partition, offset, exc.reason)
                last[partition] = offset
                continue
            item = RawPrice(offset, _bytes(msg.key()), _bytes(msg.value()), _headers(msg))
            if not self._emit(partition, arbiter.offer(instrument, seq, item, source, now)):
                lost.add(partition)
                continue
            last[partition] = offset
        self._expire(now, lost)
        self._producer.flush(FLUSH_TIMEOUT_S)
        self._commit(last, lost)

    def idle(self) -> None:
        """Release records whose reorder window has passed, even with no new input."""
        lost: set[int] = set()
        self._expire(time.monotonic(), lost)
        self._producer.poll(0)

    def _expire(self, now: float, lost: set[int]) -> None:
        for partition, arbiter in list(self._arbiters.items()):
            if partition not in lost and not self._emit(partition, arbiter.expire(now)):
                lost.add(partition)

    def _emit(self, partition: int, emissions: list[Emission[RawPrice]]) -> bool:
        topic = self._cfg.topics.prices
        for e in emissions:
            if not self._leads(partition):
                self.stats.not_leader_skips += 1
                return False
            headers: list[tuple[str, HeaderValue]] = [
                *e.item.headers,
                ("relay", self._member.encode()),
                ("relay_ns", str(time.time_ns()).encode()),
            ]
            self._producer.produce(
                topic, key=e.item.key, value=e.item.value, partition=partition, headers=headers
            )
            self.stats.relayed += 1
            if e.switched_from is not None:
                self.stats.switches += 1
        return True

    def _commit(self, last: dict[int, int], lost: set[int]) -> None:
        commits = []
        for partition, offset in last.items():
            arbiter = self._arbiters.get(partition)
            if partition in lost or arbiter is None:
                continue  # the next owner re-reads from the previous commit: nothing is lost
            held = [item.offset for item in arbiter.held()]
            upto = min([offset + 1, *held])
            commits.append(TopicPartition(self._cfg.topics.raw, partition, upto))
        if commits:
            self.consumer.commit(offsets=commits, asynchronous=True)
        for partition in lost:
            if partition in self.active:
                self.unassign(partition)
                self.active.discard(partition)

    def _dead_letter(self, msg: Message, partition: int, offset: int, reason: str) -> None:
        self.stats.dead_lettered += 1
        self._producer.produce(
            self._cfg.topics.raw_dlq,
            key=msg.key(),
            value=msg.value(),
            partition=partition,
            headers=[
                ("reason", reason.encode()),
                ("source.topic", self._cfg.topics.raw.encode()),
                ("source.partition", str(partition).encode()),
                ("source.offset", str(offset).encode()),
                ("relay", self._member.encode()),
            ],
        )


class Relay(WorkerMember):
    """One relay member.

    Args:
        cfg: the application configuration.
        member: this member's name.
        group: the relay group (one per deployment; ``relay`` by default).
    """

    def __init__(self, cfg: AppConfig, member: str, group: str = DEFAULT_GROUP) -> None:
        """Prepare the member; nothing connects until :meth:`start`."""
        self.cfg = cfg
        self.member = member
        self.stats = RelayStats()
        r = cfg.relay
        neli = Neli(
            LibNeliConfig(
                bootstrap_servers=cfg.broker.bootstrap_servers,
                group_id=relay_group_id(group),
                topic=cfg.topics.neli,
                variant=Variant.FAST,
                mode=Mode.EXCLUSIVE,
                session_timeout_ms=r.session_timeout_ms,
                threshold_ms=r.threshold_ms,
                clock_skew_ms=r.clock_skew_ms,
                pulse_interval_ms=r.pulse_interval_ms,
                expected_partitions=cfg.topics.partitions,
                member_name=f"relay/{member}",
                kafka=dict(cfg.broker.librdkafka),
                start_timeout_ms=cfg.broker.connect_timeout_ms,
            )
        )
        super().__init__(neli, _RelayWorker(cfg, group, member, neli.leads, self.stats))


async def serve_relay(cfg: AppConfig, member: str, group: str = DEFAULT_GROUP) -> None:
    """Run one relay member until SIGTERM/SIGINT, then hand over cleanly."""
    relay = Relay(cfg, member, group)
    try:
        await serve(relay, f"relay {member} ({relay_group_id(group)})")
    finally:
        log.info("relay %s: %s", member, relay.stats)
