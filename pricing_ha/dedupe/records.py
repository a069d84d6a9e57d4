"""What the relay reads: raw prices from ``prices.raw``, and its own output to rebuild from.

* :class:`RawPrice` and :func:`parse_raw_record`: one record of ``prices.raw`` as the relay
  keeps it while arbitrating (what it copies to ``prices``, its times, its trace context);
* :func:`rebuild_high_water`: on taking over partition k, every instrument's highest seq on
  ``prices[k]``, read up to the takeover marker, so that no seq is emitted twice across a
  relay fail-over.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from opentelemetry.context import Context

from pricing_ha.errors import PricingError
from pricing_ha.kafka.headers import Headers, HeaderValue, header_dict
from pricing_ha.publishing.pricing import InvalidPriceError, decode_price

__all__ = [
    "RawPrice",
    "RebuildError",
    "as_bytes",
    "parse_raw",
    "parse_raw_record",
    "rebuild_high_water",
]

log = logging.getLogger("pricing_ha.relay")


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


class RebuildError(PricingError):
    """The end of ``prices[k]`` could not be reached: the takeover must be retried, never done
    on partial high-water marks (that would emit seqs a second time)."""


def rebuild_high_water(
    settings: dict[str, Any], topic: str, partition: int, *, end_offset: int, timeout_s: float
) -> dict[str, int]:
    """Every instrument's highest seq on ``topic[partition]`` below ``end_offset``.

    ``end_offset`` is the offset of the marker record the new owner has just written and had
    acknowledged: everything before it is on the partition, so reading up to it sees all the
    output of every earlier owner. The end is learned by reading, never by asking the broker
    (whose reported end offsets can lag the data).

    Args:
        settings: the scanning consumer's configuration (a throwaway group id).
        topic: the relay's output topic.
        partition: the partition taken over.
        end_offset: the marker's offset: the scan is complete once it has been read.
        timeout_s: how long the scan may take.

    Raises:
        RebuildError: the marker was not reached within ``timeout_s``.
    """
    scan = Consumer(settings, logger=log)
    high: dict[str, int] = {}
    deadline = time.monotonic() + timeout_s
    next_offset = 0
    try:
        scan.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        while next_offset <= end_offset:
            if time.monotonic() > deadline:
                raise RebuildError(
                    f"{topic}[{partition}]: read to offset {next_offset}, not to the takeover "
                    f"marker at {end_offset}, within {timeout_s:.0f} s"
                )
            for msg in scan.consume(1000, 0.05):
                offset = msg.offset()
                if msg.error() is not None or offset is None:
                    continue
                next_offset = max(next_offset, offset + 1)
                if offset >= end_offset:
                    continue
                try:
                    instrument, seq, _ = parse_raw(msg)
                except InvalidPriceError:
                    continue  # control records (earlier markers) and anything unreadable
                if seq > high.get(instrument, 0):
                    high[instrument] = seq
    finally:
        scan.close()
    return high
