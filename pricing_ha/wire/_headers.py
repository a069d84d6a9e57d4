"""The headers of pricing-ha's records, as typed structs (header name -> UTF-8 text).

Kafka headers are bytes; every header pricing-ha writes is UTF-8 text, so each struct here maps
a header's name to its text (decode a record's headers into a ``dict[str, str]`` and
``msgspec.convert`` it). Integers are decimal ASCII digits (:data:`DECIMAL`). Readers take
nothing from a header that the value says (a price's ``seq`` is read from its value), and only
telemetry from the rest: a malformed header never costs a price.

The writers: the feed (:mod:`pricing_ha.feed.producer`), the publishers
(:mod:`pricing_ha.publishing.quote_worker`), the relay (:mod:`pricing_ha.dedupe.relayed`,
:mod:`pricing_ha.dedupe.output`, :mod:`pricing_ha.dedupe.control_writer`), an operator's
``reset-mark`` (:mod:`pricing_ha.dedupe.mark_reset`) and every dead-letter writer
(:mod:`pricing_ha.kafka.dead_letter`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from pricing_ha.kafka.headers import CONTROL_HEADER

__all__ = [
    "CONTROL_KINDS",
    "ControlHeaders",
    "DeadLetterHeaders",
    "PriceHeaders",
    "QuoteHeaders",
    "RawPriceHeaders",
]

#: A non-negative decimal integer as a header: 1-19 ASCII digits (an int64).
DECIMAL = "^[0-9]{1,19}$"
_SIGNED = "^-?[0-9]{1,19}$"
_TRACEPARENT = "^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"

Decimal = Annotated[str, Meta(pattern=DECIMAL)]
Signed = Annotated[str, Meta(pattern=_SIGNED)]
Traceparent = Annotated[
    str,
    Meta(
        pattern=_TRACEPARENT,
        description="W3C trace context (version 00) of a price sampled for tracing.",
    ),
]
Identity = Annotated[str, Meta(max_length=64)]

#: The kinds of control record (:mod:`pricing_ha.dedupe.control`); ``handover`` and ``kept``
#: were written by earlier relays. A reader skips every control record, whatever its kind.
CONTROL_KINDS = ("takeover", "release", "probe", "checkpoint", "reset", "tick", "handover", "kept")

ControlKind = Literal[
    "takeover", "release", "probe", "checkpoint", "reset", "tick", "handover", "kept"
]


class QuoteHeaders(msgspec.Struct, frozen=True, kw_only=True):
    """Headers of a quote on md.quotes: only a trace context, when the quote is sampled."""

    traceparent: Traceparent | UnsetType = UNSET


class RawPriceHeaders(msgspec.Struct, frozen=True, kw_only=True):
    """Headers of a price on prices.raw, written by the publisher that priced it."""

    seq: Annotated[Decimal, Meta(description="The value's seq (informational).")]
    group: Annotated[str, Meta(description="The publishing group (p1, p2).")]
    member: Annotated[str, Meta(description="The publishing member.")]
    publish_ns: Annotated[Decimal, Meta(description="The publisher's produce time, Unix ns.")]
    traceparent: Traceparent | UnsetType = UNSET


class PriceHeaders(msgspec.Struct, frozen=True, kw_only=True):
    """Headers of a price on prices: built by the relay from an allow-list, never copied.

    seq is written from the value; group, member, publish_ns and traceparent are the winning
    raw copy's, each kept only if well-formed; relay and relay_ns are the relay's own.
    """

    seq: Annotated[Decimal, Meta(description="The value's seq (informational).")]
    group: Annotated[Identity | UnsetType, Meta(description="Publisher of the winning copy.")] = (
        UNSET
    )
    member: Annotated[Identity | UnsetType, Meta(description="Its member.")] = UNSET
    publish_ns: Annotated[
        Decimal | UnsetType, Meta(description="The publisher's produce time, Unix ns.")
    ] = UNSET
    traceparent: Traceparent | UnsetType = UNSET
    relay: Annotated[str, Meta(description="The relay member that wrote the price.")]
    relay_ns: Annotated[Decimal, Meta(description="When it relayed the price, Unix ns.")]


class ControlHeaders(msgspec.Struct, frozen=True, kw_only=True):
    """Headers of a control record on prices (it has no key; the value is empty but for a
    checkpoint). A record is a control record if and only if it has no key and carries the
    pricing-ha-control header: subscribers skip it (a reset restarts their seq check of the
    instrument it names)."""

    kind: Annotated[
        ControlKind, Meta(description="Which kind of control record; skip unknown kinds too.")
    ] = msgspec.field(name=CONTROL_HEADER)
    marker: Annotated[
        str | UnsetType,
        Meta(description="takeover, release, probe: '<member>/<token>:<n>', the writer's own."),
    ] = UNSET
    relay: Annotated[str | UnsetType, Meta(description="The relay member that wrote it.")] = UNSET
    relay_ns: Annotated[Decimal | UnsetType, Meta(description="When it was written, Unix ns.")] = (
        UNSET
    )
    term: Annotated[
        Signed | UnsetType, Meta(description="release: the term it ends (an offset).")
    ] = UNSET
    before: Annotated[
        Literal["unclean"] | UnsetType,
        Meta(description="release: the partition was found not released before the term."),
    ] = UNSET
    below: Annotated[Signed | UnsetType, Meta(description="unclean release: the term below.")] = (
        UNSET
    )
    below_wall: Annotated[
        str | UnsetType, Meta(description="unclean release: that term's marker timestamp, seconds.")
    ] = UNSET
    instrument: Annotated[
        str | UnsetType, Meta(description="reset: the instrument whose seq check restarts.")
    ] = UNSET
    operator: Annotated[str | UnsetType, Meta(description="reset: who asked (user@host).")] = UNSET
    reset_ns: Annotated[Decimal | UnsetType, Meta(description="reset: when, Unix ns.")] = UNSET


class DeadLetterHeaders(msgspec.Struct, frozen=True, kw_only=True):
    """Headers of a dead letter on md.quotes.dlq or prices.raw.dlq. Its key and value are the
    original record's, cut at 1 KiB and 64 KiB (smaller if the topic refused it)."""

    reason: Annotated[str, Meta(description="Why the record was refused (at most 256 bytes).")]
    source_topic: Annotated[str, Meta(description="The original's topic.")] = msgspec.field(
        name="source.topic"
    )
    source_partition: Annotated[Decimal, Meta(description="The original's partition.")] = (
        msgspec.field(name="source.partition")
    )
    source_offset: Annotated[Decimal, Meta(description="The original's offset.")] = msgspec.field(
        name="source.offset"
    )
    original_key_size: Annotated[
        Signed, Meta(description="The original key's size, bytes (-1: no key).")
    ] = msgspec.field(name="original.key.size")
    original_value_size: Annotated[
        Signed, Meta(description="The original value's size, bytes (-1: none).")
    ] = msgspec.field(name="original.value.size")
    truncated: Annotated[
        Literal["true", "false"], Meta(description="Whether the key or the value was cut.")
    ]
    group: Annotated[str | UnsetType, Meta(description="Publisher's dead letter: its group.")] = (
        UNSET
    )
    member: Annotated[str | UnsetType, Meta(description="Publisher's dead letter: its member.")] = (
        UNSET
    )
    relay: Annotated[str | UnsetType, Meta(description="Relay's dead letter: its member.")] = UNSET
