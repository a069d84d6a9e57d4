"""What the relay reads from ``prices.raw``.

:class:`RawPrice` and :func:`parse_raw_record`: one record of ``prices.raw`` as the relay keeps
it while arbitrating (what it copies to ``prices``, its times, its trace context). What it reads
of its own output, ``prices``, is in :mod:`pricing_ha.dedupe.standby`.
"""

from __future__ import annotations

import logging
import sys
from typing import NamedTuple

import msgspec
from confluent_kafka import Message
from opentelemetry.context import Context

from pricing_ha.dedupe.relayed import relayed_headers
from pricing_ha.kafka.headers import Headers, HeaderValue, header_int, header_pairs, header_text
from pricing_ha.publishing.pricing import InvalidPriceError, Price, decode_price, encode_price

__all__ = ["RawFields", "RawPrice", "as_bytes", "parse_raw", "parse_raw_price", "parse_raw_record"]

log = logging.getLogger("pricing_ha.relay")


class RawPrice(msgspec.Struct, frozen=True):
    """One record of ``prices.raw`` as the relay keeps it.

    A frozen struct, not a frozen dataclass: one is created per raw record, and a struct is
    created in C, several times cheaper.

    What it writes on ``prices`` (:attr:`value`, :attr:`headers`) is built when asked for, once
    the copy is emitted: about half the copies are duplicates the arbiter drops, which then
    cost neither an encoding nor a header allow-list.

    Attributes:
        offset: its offset on ``prices.raw``.
        key: the instrument.
        price: the price decoded from its value (what the relay arbitrates on and writes).
        raw_headers: the raw record's headers, as read (trusted for nothing: :attr:`headers`
            keeps only the allow-list).
        source_ns: the quote's source time (Unix ns), for the end-to-end latency.
        publish_ns: when the publisher produced it (its ``publish_ns`` header), or 0.
        trace: the context of its ``process`` span when the price is traced, else ``None``.
    """

    offset: int
    key: bytes
    price: Price
    raw_headers: Headers
    source_ns: int = 0
    publish_ns: int = 0
    trace: Context | None = None

    @property
    def value(self) -> bytes:
        """The price's canonical encoding (what the relay writes on ``prices``)."""
        return encode_price(self.price)

    @property
    def headers(self) -> list[tuple[str, HeaderValue]]:
        """The headers the relay writes on ``prices`` (allow-listed: :mod:`.relayed`)."""
        return relayed_headers(self.raw_headers, self.price.seq)


class RawFields(NamedTuple):
    """What :func:`parse_raw_record` finds in a raw price.

    Attributes:
        instrument: the instrument (interned).
        seq: the seq of its value.
        source: ``group/member`` from its headers.
        source_ns: the quote's source time.
        publish_ns: its ``publish_ns`` header, or 0.
        value: the canonical encoding of the decoded price (:func:`encode_price`): what the
            relay writes, never the bytes it read (:mod:`.relayed`).
        epoch: the epoch of its value (0: none; :mod:`pricing_ha.publishing.epochs`).
    """

    instrument: str
    seq: int
    source: str
    source_ns: int
    publish_ns: int
    value: bytes
    epoch: int = 0


def as_bytes(data: HeaderValue) -> bytes:
    """A key, value or header as bytes (``None`` as empty)."""
    return data.encode() if isinstance(data, str) else (data or b"")


def parse_raw(msg: Message) -> tuple[str, int, str]:
    """Instrument, seq and source (``group/member``) of a raw price.

    Raises:
        InvalidPriceError: the record is not a valid price.
    """
    fields = parse_raw_record(msg, msg.headers())
    return fields.instrument, fields.seq, fields.source


def parse_raw_record(msg: Message, raw_headers: Headers) -> RawFields:
    """Instrument, seq, source, source time, ``publish_ns`` (0 if absent), canonical value and
    epoch of a raw price.

    Args:
        msg: the record.
        raw_headers: its headers (``msg.headers()``, which builds a new list at every call).

    Raises:
        InvalidPriceError: the record is not a valid price.
    """
    instrument, price, source, publish_ns, _ = parse_raw_price(msg, raw_headers)
    return RawFields(
        instrument,
        price.seq,
        source,
        price.source_time_ns,
        publish_ns,
        encode_price(price),
        price.epoch,
    )


def parse_raw_price(msg: Message, raw_headers: Headers) -> tuple[str, Price, str, int, HeaderValue]:
    """:func:`parse_raw_record`'s reading, with the decoded price in place of its encoding:
    instrument (interned), price, source (``group/member``), ``publish_ns`` (0 if absent) and
    the first ``traceparent`` header's value (``None`` if absent; not checked here: see
    :func:`~pricing_ha.telemetry.pricepath.sampled_parent`).

    Raises:
        InvalidPriceError: the record is not a valid price.
    """
    key, value = msg.key(), msg.value()
    if not isinstance(key, bytes) or not isinstance(value, bytes):
        raise InvalidPriceError("missing key or value")
    price = decode_price(value)
    try:
        # Interned: the arbiter keeps it for the instrument's line, the standby tail (which
        # interns too) for its mark; one string per instrument then serves both (~20 bytes
        # per instrument saved net of the intern table, measured at 100,000 instruments).
        instrument = sys.intern(key.decode())
    except UnicodeDecodeError as exc:
        raise InvalidPriceError("key is not UTF-8") from exc
    if instrument != price.instrument:
        raise InvalidPriceError(f"key {instrument!r} differs from instrument {price.instrument!r}")
    source, publish_ns, traceparent = _read_headers(raw_headers)
    return instrument, price, source, publish_ns, traceparent


# (group, member) header values -> their source, "group/member": a relay sees a handful of
# publishers, so one dict look-up replaces two decodes and a format per record. Bounded
# (emptied when full), so headers that vary with every record cost only the look-up.
_SOURCES: dict[tuple[HeaderValue, HeaderValue], str] = {}
_MAX_SOURCES = 256


def _read_headers(raw_headers: Headers) -> tuple[str, int, HeaderValue]:
    """The source (``group/member``, each ``"?"`` if absent), ``publish_ns`` (0 if absent) and
    first ``traceparent`` value (``None`` if absent) of a raw price.

    Raises:
        InvalidPriceError: ``group``, ``member`` or ``publish_ns`` is present but malformed
            (not UTF-8; ``publish_ns`` not a decimal integer). Only these headers are read
            here; the others are not trusted for anything the relay decides.
    """
    group: HeaderValue = b"?"
    member: HeaderValue = b"?"
    publish_ns = 0
    traceparent: HeaderValue = None
    # One pass without copies (a price has four or five headers; every record is read).
    for name, value in header_pairs(raw_headers):
        if name == "publish_ns":
            number = header_int(value)
            if number is None:
                shown = as_bytes(value)[:32]
                raise InvalidPriceError(f"header 'publish_ns' is not a decimal integer: {shown!r}")
            publish_ns = number
        elif name == "group":
            group = value
        elif name == "member":
            member = value
        elif name == "traceparent" and traceparent is None:
            traceparent = value
    source = _SOURCES.get((group, member))
    if source is None:
        source = _source(group, member)
    return source, publish_ns, traceparent


def _source(group: HeaderValue, member: HeaderValue) -> str:
    """``group/member`` from their header values, remembered in ``_SOURCES``.

    Raises:
        InvalidPriceError: one of them is not UTF-8.
    """
    texts = []
    for name, value in (("group", group), ("member", member)):
        text = header_text(value)
        if text is None:
            raise InvalidPriceError(f"header {name!r} is not UTF-8")
        texts.append(text)
    if len(_SOURCES) >= _MAX_SOURCES:
        _SOURCES.clear()
    source = _SOURCES[(group, member)] = "/".join(texts)
    return source
