"""pricing-ha's wire contract: every record on its topics as a typed msgspec struct.

Values (:class:`Quote`, :class:`Price`, :class:`Checkpoint`, :class:`Heartbeat`) and headers
(:class:`QuoteHeaders`, :class:`RawPriceHeaders`, :class:`PriceHeaders`,
:class:`ControlHeaders`, :class:`DeadLetterHeaders`) are defined once here; the JSON Schema
files under ``docs/schemas/`` and the AsyncAPI document ``docs/asyncapi.json`` are generated
from them (:mod:`pricing_ha.wire.schemas`). Decode a price with::

    msgspec.json.decode(record.value(), type=pricing_ha.wire.Price)

The hot path's own decoders (:func:`~pricing_ha.publishing.pricing.decode_price`, ...) are
still the hand-written ones; the tests hold both to the same bytes.
"""

from __future__ import annotations

from pricing_ha.wire._headers import (
    CONTROL_KINDS,
    ControlHeaders,
    DeadLetterHeaders,
    PriceHeaders,
    QuoteHeaders,
    RawPriceHeaders,
)
from pricing_ha.wire._values import Checkpoint, Heartbeat, Price, Quote

__all__ = [
    "CONTROL_KINDS",
    "Checkpoint",
    "ControlHeaders",
    "DeadLetterHeaders",
    "Heartbeat",
    "Price",
    "PriceHeaders",
    "Quote",
    "QuoteHeaders",
    "RawPriceHeaders",
]
