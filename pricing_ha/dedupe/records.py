"""What the relay reads: raw prices from ``prices.raw``, and its own output to rebuild from.

* :class:`RawPrice` and :func:`parse_raw_record`: one record of ``prices.raw`` as the relay
  keeps it while arbitrating (what it copies to ``prices``, its times, its trace context);
* :func:`rebuild_high_water`: on taking over partition k, every instrument's highest seq on
  ``prices[k]``, read to its end, so that no seq is emitted twice across a relay fail-over.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition
from opentelemetry.context import Context

from pricing_ha.kafka.headers import Headers, HeaderValue, header_dict
from pricing_ha.publishing.pricing import InvalidPriceError, decode_price

__all__ = ["RawPrice", "as_bytes", "parse_raw", "parse_raw_record", "rebuild_high_water"]

log = logging.getLogger("pricing_ha.relay")

_REBUILD_IDLE_S = 0.5
_REBUILD_EMPTY_S = 2.0  # how long an apparently empty partition is watched before trusting it
# How long the scan waits with no data for records the broker's high watermark promises. Some
# brokers report a watermark past the last readable record (Tansu, after multi-record
# batches); without this bound such a partition would never be taken over.
_REBUILD_HINT_IDLE_S = 10.0


@dataclass(frozen=True, slots=True)
class RawPrice:
    """One record of ``prices.raw`` as the relay keeps it.

    Attributes:
        offset: its offset on ``prices.raw``.
        key: the instrument.
        value: the price, as published.
        headers: its headers, copied to the output.
        source_ns: the quote's source time (Unix ns), for the end-to-end latency.
        publish_ns: when the publisher produced it (its ``publish_ns`` header), or 0.
        trace: the context of its ``process`` span when the price is traced, else ``None``.
    """

    offset: int
    key: bytes
    value: bytes
    headers: list[tuple[str, HeaderValue]]
    source_ns: int = 0
    publish_ns: int = 0
    trace: Context | None = None


def as_bytes(data: HeaderValue) -> bytes:
    """A key, value or header as bytes (``None`` as empty)."""
    return data.encode() if isinstance(data, str) else (data or b"")


def parse_raw(msg: Message) -> tuple[str, int, str]:
    """Instrument, seq and source (``group/member``) of a raw price.

    Raises:
        InvalidPriceError: the record is not a valid price.
    """
    instrument, seq, source, _, _ = parse_raw_record(msg, msg.headers())
    return instrument, seq, source


def parse_raw_record(msg: Message, raw_headers: Headers) -> tuple[str, int, str, int, int]:
    """Instrument, seq, source, source time and ``publish_ns`` (0 if absent) of a raw price.

    Args:
        msg: the record.
        raw_headers: its headers (``msg.headers()``, which builds a new list at every call).

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
    headers = header_dict(raw_headers)
    source = f"{headers.get('group', '?')}/{headers.get('member', '?')}"
    published = headers.get("publish_ns", "")
    publish_ns = int(published) if published.isdigit() else 0
    return instrument, price.seq, source, price.source_time_ns, publish_ns


def rebuild_high_water(settings: dict[str, Any], topic: str, partition: int) -> dict[str, int]:
    """Every instrument's highest seq on ``topic[partition]``, read to the end.

    The end is where nothing new arrives for a while: nobody else emits on this partition
    (exclusive ownership), so the partition is quiescent. The broker's high watermark is
    only a hint that more is to come (it can be stale or too high on some brokers): the scan
    waits for records below it for at most ``_REBUILD_HINT_IDLE_S`` of silence, and the idle
    clock starts after the first fetch has had time to complete.

    Args:
        settings: the scanning consumer's configuration (a throwaway group id).
        topic: the relay's output topic.
        partition: the partition taken over.
    """
    scan = Consumer(settings, logger=log)
    high: dict[str, int] = {}
    tp = TopicPartition(topic, partition, OFFSET_BEGINNING)
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
            if next_offset < end_hint and idle >= _REBUILD_HINT_IDLE_S:
                log.warning(
                    "%s[%d]: nothing for %.0f s below the watermark %d; the end is offset %d",
                    topic,
                    partition,
                    idle,
                    end_hint,
                    next_offset,
                )
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
