"""The values of pricing-ha's records, as typed structs: what the JSON on each topic is.

Each struct describes the bytes the real encoder writes today, field for field
(:func:`~pricing_ha.publishing.quotes.encode_quote`,
:func:`~pricing_ha.publishing.pricing.encode_price`,
:meth:`~pricing_ha.dedupe.control.PartitionView.encode`, :meth:`neli.wire.Heartbeat.encode`), and
the rules its reader applies that a schema can state: exact JSON types (``true`` is not an integer,
an integer is a number), which fields may be left out (``epoch``: 0), ranges. Unknown fields are
ignored, as the readers ignore them. A rule that spans fields (``bid <= ask``, the key equals
``instrument``) is in the field's description and in the AsyncAPI document.

``tests/unit/wire/test_wire_contract.py`` decodes what the real encoders write with these structs,
so they cannot drift from the code; the JSON Schema files in ``docs/schemas/`` are generated
from them (:mod:`pricing_ha.wire.schemas`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

__all__ = ["Checkpoint", "Heartbeat", "Price", "Quote"]

# The bounds of pricing_ha.publishing (quotes.MAX_SEQ, epochs.MAX_EPOCH: both must fit Kafka
# headers, Spark LongType and Parquet int64), restated here because the wire contract is a layer
# below publishing, whose decoders use it; test_wire_contract holds them equal.
MAX_SEQ = 2**63 - 1
MAX_EPOCH = 2**63 - 1
#: Longest instrument symbol a publisher accepts (``validate_quote``).
MAX_SYMBOL_LEN = 64

Seq = Annotated[
    int,
    Meta(
        ge=1,
        le=MAX_SEQ,
        description="The source's per-instrument sequence number: one step up per quote within "
        "an epoch, from 1. (epoch, seq) ordered lexicographically is the dedupe key.",
    ),
]
Epoch = Annotated[
    int,
    Meta(
        ge=0,
        le=MAX_EPOCH,
        description="The feed's epoch: its start, Unix milliseconds. A restarted feed starts a "
        "larger epoch and numbers from seq 1 again. Absent: 0 (an older writer).",
    ),
]
_SOURCE_TIME = "When the source produced the quote, Unix epoch nanoseconds."
SourceTimeNs = Annotated[int, Meta(description=_SOURCE_TIME)]


class Quote(msgspec.Struct, frozen=True, kw_only=True):
    """A market-data quote on md.quotes; the Kafka key is the instrument's UTF-8 bytes."""

    instrument: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=MAX_SYMBOL_LEN,
            description="The symbol: printable, no leading or trailing blank; equal to the key.",
        ),
    ]
    epoch: Epoch = 0
    seq: Seq
    bid: Annotated[float, Meta(gt=0, description="Best bid; finite.")]
    ask: Annotated[float, Meta(description="Best ask; finite, at least bid.")]
    source_time_ns: Annotated[int, Meta(ge=0, description=_SOURCE_TIME)]


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """A price on prices.raw and prices; the Kafka key is the instrument's UTF-8 bytes.

    The value is canonical: compact JSON, keys sorted, these seven fields, each float in its
    shortest round-trip form. Both publishing groups write byte-identical values for a quote.
    """

    ask: Annotated[float, Meta(description="Published ask: a multiple of the tick, above bid.")]
    bid: Annotated[float, Meta(gt=0, description="Published bid: a multiple of the tick.")]
    epoch: Epoch = 0
    instrument: Annotated[
        str, Meta(min_length=1, description="The symbol (at most 64 characters); equal to the key.")
    ]
    mid: Annotated[float, Meta(description="The midpoint of bid and ask.")]
    seq: Seq
    source_time_ns: SourceTimeNs


Mark = Annotated[
    int | tuple[int, int],
    Meta(description="An instrument's highest seq: the seq itself in epoch 0, else [epoch, seq]."),
]


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """The value of a checkpoint control record on prices: a relay's view of the partition
    below position. Relay-internal; subscribers skip it with every control record."""

    v: Annotated[Literal[1], Meta(description="The checkpoint format's version.")]
    position: Annotated[int, Meta(ge=0, description="The next offset the view would read.")]
    high: Annotated[dict[str, Mark], Meta(description="Instrument -> its highest position.")]
    last_data: Annotated[int, Meta(description="Offset of the last price (-1: none).")]
    term: Annotated[int, Meta(description="Offset of the last takeover marker (-1: none).")]
    term_wall: Annotated[
        float, Meta(description="That marker's timestamp, seconds (-1: not known).")
    ] = -1.0
    released_term: Annotated[int, Meta(description="The term the last release named.")]
    released_at: Annotated[int, Meta(description="Offset of the last release marker.")]
    requests: Annotated[
        dict[str, int], Meta(description="Member token -> offset of its last probe or takeover.")
    ]


Scalar = str | int | float | bool | None


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True):
    """A NELI heartbeat on pricing.neli (no key; written to an explicit partition).

    Internal to the NELI groups (publishers and the relay); status tools read it.
    """

    v: Annotated[Literal[1], Meta(description="The heartbeat format's version.")]
    group: Annotated[str, Meta(description="The sender's consumer group.")] = msgspec.field(
        name="g"
    )
    member_id: Annotated[str, Meta(description="Unique per process start.")] = msgspec.field(
        name="m"
    )
    member_name: Annotated[str, Meta(description="Human-readable sender name.")] = msgspec.field(
        name="n"
    )
    incarnation: Annotated[
        int, Meta(ge=0, description="The sender's term counter on this partition, else 0.")
    ] = msgspec.field(name="i")
    counter: Annotated[int, Meta(ge=0, description="Per-sender sequence number.")] = msgspec.field(
        name="c"
    )
    sent_mono: Annotated[
        float, Meta(description="The sender's monotonic clock at send time, seconds.")
    ] = msgspec.field(name="sm")
    sent_wall: Annotated[
        float, Meta(description="The sender's wall clock at send time, Unix seconds.")
    ] = msgspec.field(name="sw")
    led: Annotated[list[int], Meta(description="The partitions the sender leads.")] = msgspec.field(
        name="l"
    )
    meta: Annotated[
        dict[str, Scalar], Meta(description="Opaque application data (flat JSON scalars).")
    ] = msgspec.field(default_factory=dict, name="x")
    since: Annotated[
        float | None, Meta(description="When the sender's term on this partition began (Unix s).")
    ] = msgspec.field(default=None, name="s")
