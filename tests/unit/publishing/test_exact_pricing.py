"""The publisher's integer pricing path: the decimal definition's results, bit for bit."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pricing_ha.config import InstrumentOverride
from pricing_ha.publishing import pricing
from pricing_ha.publishing.pricing import (
    InstrumentParams,
    ParamsBook,
    Price,
    encode_price,
    price_quote,
)
from pricing_ha.publishing.quotes import InvalidQuoteError, Quote

TICKS = [
    Decimal("0.00001"),
    Decimal("0.0001"),
    Decimal("0.01"),
    Decimal("0.25"),
    Decimal("0.0005"),
    Decimal("0.010"),  # a trailing zero: the same tick as 0.01
    Decimal("0.0003"),  # a division by 3 does not terminate: always the decimal definition
    Decimal(1),
    Decimal(5),
    Decimal("1E+1"),
    Decimal("1E-12"),
]
PRICES = st.one_of(
    st.floats(min_value=1e-9, max_value=1e9, allow_nan=False, allow_infinity=False),
    st.integers(min_value=1, max_value=2_000_000).map(lambda n: n / 100_000),
    st.floats(min_value=1e15, max_value=1e20),  # exponent forms, 17 digits
)
BPS = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=9_999.0, allow_nan=False),
    st.integers(min_value=0, max_value=2_000).map(lambda n: n / 10),
)


def _outcome(fn: object, q: Quote, *args: object) -> Price | str:
    try:
        return fn(q, *args)  # type: ignore[operator, no-any-return]
    except InvalidQuoteError as exc:
        return f"invalid: {exc.reason}"


@given(
    bid=PRICES,
    width=PRICES,
    spread=BPS,
    skew=st.one_of(BPS, BPS.map(lambda x: -x)),
    tick=st.sampled_from(TICKS),
)
def test_book_prices_as_the_decimal_definition(
    bid: float, width: float, spread: float, skew: float, tick: Decimal
) -> None:
    """ParamsBook.price gives price_quote's price (same floats, same bytes) or its error."""
    ask = bid + width if width < 1e6 else bid
    params = InstrumentParams(spread_bps=spread, skew_bps=skew, tick_size=tick)
    q = Quote(instrument="X", seq=3, bid=bid, ask=ask, source_time_ns=7, epoch=9)
    expected = _outcome(price_quote, q, params)
    got = _outcome(ParamsBook(params).price, q)
    assert got == expected
    if isinstance(got, Price) and isinstance(expected, Price):
        assert encode_price(got) == encode_price(expected)


def test_overrides_use_their_own_parameters() -> None:
    """An instrument's override prices it; other instruments get the defaults."""
    defaults = InstrumentParams(spread_bps=2.0, skew_bps=0.0, tick_size=Decimal("0.00001"))
    book = ParamsBook(defaults, {"USDJPY": InstrumentOverride(tick_size=Decimal("0.001"))})
    jpy = Quote(instrument="USDJPY", seq=1, bid=151.2345, ask=151.2367, source_time_ns=1)
    eur = Quote(instrument="EURUSD", seq=1, bid=1.08501, ask=1.08503, source_time_ns=1)
    assert book.price(jpy) == price_quote(jpy, book.params_for("USDJPY"))
    assert book.price(jpy).bid == 151.22  # 2 bp of 151.2356 is 0.03: wider than the quote
    assert book.price(eur) == price_quote(eur, defaults)


def test_ordinary_quotes_avoid_the_decimal_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quote with ordinary prices is priced without the (slow) decimal arithmetic."""

    def refuse(*_a: object) -> Price:
        raise AssertionError("priced in decimal")

    book = ParamsBook(InstrumentParams(spread_bps=2.0, skew_bps=1.5, tick_size=Decimal("0.00001")))
    monkeypatch.setattr(pricing, "price_quote", refuse)
    p = book.price(Quote(instrument="EURUSD", seq=1, bid=1.08501, ask=1.08503, source_time_ns=1))
    assert (p.bid, p.ask) == (1.08507, 1.0853)


def test_below_one_tick_is_refused_with_the_same_reason() -> None:
    """A bid that rounds below one tick is refused exactly as the decimal definition does."""
    params = InstrumentParams(spread_bps=0.0, skew_bps=0.0, tick_size=Decimal("0.01"))
    q = Quote(instrument="PENNY", seq=4, bid=0.004, ask=0.006, source_time_ns=1)
    assert _outcome(ParamsBook(params).price, q) == _outcome(price_quote, q, params)
    assert str(_outcome(price_quote, q, params)).startswith("invalid: priced bid of PENNY")
