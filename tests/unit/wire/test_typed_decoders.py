"""The typed decoders (the wire contract's structs) agree with the strict field-by-field readers:
for any JSON object, the same value or, both, a refusal, whose reason is the strict reader's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pricing_ha.publishing import pricing, quotes
from pricing_ha.publishing.epochs import MAX_EPOCH
from pricing_ha.publishing.pricing import InvalidPriceError, decode_price
from pricing_ha.publishing.quotes import InvalidQuoteError, parse_quote, validate_quote
from tests import strategies

FIELDS = ["instrument", "seq", "bid", "ask", "mid", "source_time_ns", "epoch"]
values = strategies.json_values(int_bits=70, max_size=3, max_leaves=8)
near_valid = {
    "instrument": st.sampled_from(["EURUSD", "", " X", "Y\n", "Z" * 65]) | st.text(max_size=4),
    "seq": st.integers(-2, 2**64) | st.booleans() | st.floats(allow_nan=False) | st.none(),
    "bid": st.floats(allow_nan=False) | st.integers(-2, 5) | st.booleans(),
    "ask": st.floats(allow_nan=False) | st.integers(-2, 5) | st.text(max_size=2),
    "mid": st.floats(allow_nan=False) | st.integers(-2, 5),
    "source_time_ns": st.integers(-(2**64), 2**64) | st.floats(allow_nan=False),
    "epoch": st.integers(-2, 2**64) | st.booleans(),
}
objects = st.fixed_dictionaries({}, optional=near_valid) | st.dictionaries(
    st.sampled_from(FIELDS), values, max_size=8
)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except (InvalidQuoteError, InvalidPriceError) as exc:
        return ("refused", str(exc))


def _strict_quote(value: bytes, key: bytes) -> quotes.Quote:
    quote = validate_quote(quotes._parse_slowly(value))
    if key != quote.instrument.encode():
        raise InvalidQuoteError("key")
    return quote


def _strict_price(value: bytes) -> pricing.Price:
    price = pricing._decode_slowly(value)
    if not price.instrument or not 1 <= price.seq <= quotes.MAX_SEQ:
        raise InvalidPriceError("range")
    if not 0 <= price.epoch <= MAX_EPOCH or not 0 < price.bid <= price.ask:
        raise InvalidPriceError("range")
    return price


@settings(max_examples=400)
@given(objects)
def test_quotes_decode_alike_on_both_paths(obj: dict[str, Any]) -> None:
    """parse_quote accepts exactly what the strict reader accepts, with the same quote."""
    value = json.dumps(obj).encode()
    key = str(obj.get("instrument", "")).encode()
    fast, strict = (
        _outcome(lambda: parse_quote(value, key)),
        _outcome(lambda: _strict_quote(value, key)),
    )
    assert fast[0] == strict[0]
    if fast[0] == "ok":
        assert fast[1] == strict[1]


@settings(max_examples=400)
@given(objects)
def test_prices_decode_alike_on_both_paths(obj: dict[str, Any]) -> None:
    """decode_price accepts exactly what the strict reader accepts, with the same price."""
    value = json.dumps(obj).encode()
    fast, strict = _outcome(lambda: decode_price(value)), _outcome(lambda: _strict_price(value))
    assert fast[0] == strict[0]
    if fast[0] == "ok":
        assert fast[1] == strict[1]


VALID_PRICE = (
    b'{"ask":2.0,"bid":1.0,"epoch":5,"instrument":"A","mid":1.5,"seq":3,"source_time_ns":7}'
)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (VALID_PRICE.replace(b'"mid":1.5', b'"mid":1e400'), "not valid JSON"),
        (VALID_PRICE.replace(b'"seq":3', b'"seq":9223372036854775808'), "seq out of range"),
        (VALID_PRICE.replace(b'"seq":3', b'"seq":true'), "'seq' must be an integer"),
        (VALID_PRICE.replace(b'"bid":1.0', b'"bid":3.0'), "bid 3.0, ask 2.0"),
    ],
)
def test_a_price_refused_by_the_typed_decoder_gets_the_strict_readers_reason(
    value: bytes, why: str
) -> None:
    """Out of range, overflowing, mistyped or crossed: refused, with the field-by-field reason."""
    assert decode_price(VALID_PRICE).seq == 3
    with pytest.raises(InvalidPriceError, match=why):
        decode_price(value)
