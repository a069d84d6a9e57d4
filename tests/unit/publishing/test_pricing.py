"""The pure pricing function, canonical price encoding and per-instrument parameters."""

from __future__ import annotations

import random
from decimal import ROUND_UP, Context, Decimal, localcontext

import pytest

from pricing_ha.config import InstrumentOverride, PricingConfig
from pricing_ha.errors import ConfigError
from pricing_ha.publishing.pricing import (
    InstrumentParams,
    InvalidPriceError,
    ParamsBook,
    Price,
    decode_price,
    encode_price,
    price_quote,
)
from pricing_ha.publishing.quotes import InvalidQuoteError, Quote

TICK5 = Decimal("0.00001")


def quote(bid: float, ask: float, seq: int = 1, instrument: str = "EURUSD") -> Quote:
    """Builds a quote with a fixed source time."""
    return Quote(instrument=instrument, seq=seq, bid=bid, ask=ask, source_time_ns=1_000)


def params(spread: float = 0.0, skew: float = 0.0, tick: Decimal = TICK5) -> InstrumentParams:
    """Builds instrument parameters."""
    return InstrumentParams(spread_bps=spread, skew_bps=skew, tick_size=tick)


def test_zero_spread_on_tick_quote_passes_through() -> None:
    """With no spread or skew, an on-tick quote is published unchanged."""
    p = price_quote(quote(1.08501, 1.08503), params())
    assert (p.bid, p.ask, p.mid) == (1.08501, 1.08503, 1.08502)
    assert (p.instrument, p.seq, p.source_time_ns) == ("EURUSD", 1, 1_000)


def test_spread_widens_and_rounds_outwards() -> None:
    """A 2 bp spread around mid 1.08502 rounds bid down and ask up to the tick."""
    p = price_quote(quote(1.08501, 1.08503), params(spread=2.0))
    # half-spread = 1.08502 * 2 / 20000 = 0.000108502
    assert (p.bid, p.ask) == (1.08491, 1.08513)
    assert p.mid == 1.08502


def test_wider_quote_spread_is_kept() -> None:
    """The configured spread is a minimum: a wider market quote stays as wide."""
    p = price_quote(quote(1.0, 1.1), params(spread=1.0))
    assert (p.bid, p.ask) == (1.0, 1.1)


def test_skew_shifts_both_sides() -> None:
    """A positive skew raises bid and ask by skew_bps of mid."""
    p = price_quote(quote(100.0, 100.0), params(skew=10.0, tick=Decimal("0.01")))
    # mid 100 * (1 + 10 bp) = 100.1; zero width forces one tick.
    assert (p.bid, p.ask) == (100.1, 100.11)


def test_locked_quote_gets_at_least_one_tick() -> None:
    """A zero-width result is widened to one tick so the price is never locked."""
    p = price_quote(quote(1.5, 1.5), params(tick=Decimal("0.1")))
    assert p.ask > p.bid
    assert (p.bid, p.ask) == (1.5, 1.6)


def test_decimal_arithmetic_avoids_float_drift() -> None:
    """Prices that floats cannot represent exactly still land exactly on ticks."""
    # In binary floats 0.1 + 0.2 != 0.3 and 1.1 / 0.1 < 11; decimal ticks are exact.
    p = price_quote(quote(0.1, 0.3), params(tick=Decimal("0.1")))
    assert (p.bid, p.ask, p.mid) == (0.1, 0.3, 0.2)
    p = price_quote(quote(1.1, 1.1), params(tick=Decimal("0.1")))
    assert p.bid == 1.1


def test_output_prices_are_tick_multiples() -> None:
    """Every published bid and ask is an exact multiple of the tick size."""
    rng = random.Random(7)
    for _ in range(500):
        bid = round(rng.uniform(0.5, 200.0), 5)
        ask = round(bid + rng.uniform(0, 0.01), 5)
        tick = rng.choice([Decimal("0.00001"), Decimal("0.001"), Decimal("0.25")])
        p = price_quote(quote(bid, ask), params(spread=rng.uniform(0, 5), tick=tick))
        assert Decimal(repr(p.bid)) % tick == 0
        assert Decimal(repr(p.ask)) % tick == 0
        assert p.bid <= bid
        assert p.ask >= ask
        assert p.bid < p.ask


def test_pricing_is_deterministic() -> None:
    """The same quote and parameters always give byte-identical encodings."""
    q = quote(1.23456, 1.23467, seq=42)
    p = params(spread=1.7, skew=-0.3)
    encodings = {encode_price(price_quote(q, p)) for _ in range(50)}
    assert len(encodings) == 1


def test_pricing_ignores_the_callers_decimal_context() -> None:
    """A caller's low-precision decimal context cannot change the price."""
    q, p = quote(1.23456, 1.23467, seq=42), params(spread=1.7, skew=-0.3)
    expected = encode_price(price_quote(q, p))
    with localcontext(Context(prec=3, rounding=ROUND_UP)):
        assert encode_price(price_quote(q, p)) == expected


def test_bid_below_one_tick_is_rejected() -> None:
    """A price whose bid rounds below one tick cannot be published."""
    with pytest.raises(InvalidQuoteError, match="below one tick"):
        price_quote(quote(0.004, 0.006), params(tick=Decimal("0.01"), spread=9000))


def test_encoding_is_canonical() -> None:
    """encode_price writes sorted keys, compact, exactly the seven price fields."""
    p = Price(instrument="EURUSD", seq=3, bid=1.1, ask=1.2, mid=1.15, source_time_ns=9)
    assert encode_price(p) == (
        b'{"ask":1.2,"bid":1.1,"epoch":0,"instrument":"EURUSD","mid":1.15,"seq":3,'
        b'"source_time_ns":9}'
    )


def test_decode_round_trip() -> None:
    """decode_price inverts encode_price."""
    p = price_quote(quote(1.08501, 1.08503, seq=11), params(spread=2.0))
    assert decode_price(encode_price(p)) == p


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "empty"),
        (b"{", "not valid JSON"),
        (b'"x"', "not a JSON object"),
        (b'{"instrument":"A","seq":1,"bid":1,"ask":2,"source_time_ns":0}', "missing field 'mid'"),
        (b'{"instrument":"A","seq":0,"bid":1,"ask":2,"mid":1.5,"source_time_ns":0}', "seq"),
        (b'{"instrument":"A","seq":1,"bid":3,"ask":2,"mid":2.5,"source_time_ns":0}', "bid 3.0"),
        (b'{"instrument":"","seq":1,"bid":1,"ask":2,"mid":1.5,"source_time_ns":0}', "instrument"),
    ],
)
def test_decode_rejects_bad_values(data: bytes | None, reason: str) -> None:
    """Malformed price values raise InvalidPriceError with a reason."""
    with pytest.raises(InvalidPriceError) as info:
        decode_price(data)
    assert reason in info.value.reason


def test_instrument_params_are_validated() -> None:
    """Non-positive tick sizes and out-of-range spreads are refused."""
    with pytest.raises(ConfigError):
        params(tick=Decimal(0))
    with pytest.raises(ConfigError):
        params(spread=-1.0)


def test_params_book_resolves_overrides_with_defaults() -> None:
    """Overrides replace only the fields they set; unknown instruments get the defaults."""
    cfg = PricingConfig(
        spread_bps=2.0,
        skew_bps=0.5,
        tick_size=TICK5,
        instruments={"USDJPY": InstrumentOverride(tick_size=Decimal("0.001"))},
    )
    book = ParamsBook.from_config(cfg)
    assert book.params_for("USDJPY") == params(spread=2.0, skew=0.5, tick=Decimal("0.001"))
    assert book.params_for("NEW123") == params(spread=2.0, skew=0.5)
    assert set(book.overridden()) == {"USDJPY"}


def test_params_book_prices_with_the_instrument_params() -> None:
    """ParamsBook.price uses the instrument's own tick size."""
    cfg = PricingConfig(instruments={"USDJPY": InstrumentOverride(tick_size=Decimal("0.01"))})
    book = ParamsBook.from_config(cfg)
    p = book.price(quote(151.2001, 151.2004, instrument="USDJPY"))
    assert Decimal(repr(p.bid)) % Decimal("0.01") == 0
