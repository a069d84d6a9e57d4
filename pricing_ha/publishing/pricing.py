"""Where prices are computed: a pure, deterministic function of a quote and its parameters.

Groups P1 and P2 price the same quote independently, and the relay deduplicates their outputs by
``(instrument, epoch, seq)``; subscribers must not be able to tell which group a price came from. So
:func:`price_quote` depends on nothing but its arguments, does its arithmetic in decimal (each
float enters as its shortest round-trip decimal form, e.g. ``1.08501``, and integer tick counts
decide the result), and :func:`encode_price` writes a canonical JSON form (sorted keys, fixed
field set, no publisher identity or time). The same quote and parameters therefore give
byte-identical values in every process, on every platform.

The price of a quote with parameters ``(spread_bps, skew_bps, tick_size)``:

1. ``mid = (bid + ask) / 2`` of the quote, shifted by ``skew_bps`` basis points of itself;
2. ``half = max((ask - bid) / 2, mid * spread_bps / 20000)``: never narrower than the quote,
   never narrower than the configured spread;
3. ``bid = floor((mid - half) / tick) * tick``, ``ask = ceil((mid + half) / tick) * tick``
   (rounding always widens), with at least one tick between them;
4. the published ``mid`` is the midpoint of the published bid and ask.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal, localcontext

import msgspec
import orjson

from pricing_ha import wire
from pricing_ha.config import InstrumentOverride, PricingConfig
from pricing_ha.errors import ConfigError, PricingError
from pricing_ha.publishing._exact_pricing import ExactPricer
from pricing_ha.publishing._wire import WireFormatError, get_float, get_int, get_str, load_object
from pricing_ha.publishing.epochs import MAX_EPOCH, position
from pricing_ha.publishing.quotes import MAX_SEQ, InvalidQuoteError, Quote

__all__ = [
    "InstrumentParams",
    "InvalidPriceError",
    "ParamsBook",
    "Price",
    "decode_price",
    "encode_price",
    "price_quote",
]

# 34 significant digits (IEEE decimal128) hold any quote price and bps factor exactly enough
# that the floor/ceil to ticks never depends on the caller's thread-local decimal context.
_CONTEXT = Context(prec=34, rounding=ROUND_HALF_EVEN)
_BPS = Decimal(10_000)
_TWO = Decimal(2)


class InvalidPriceError(PricingError):
    """A ``prices.raw``/``prices`` value cannot be decoded.

    Attributes:
        reason: what is wrong, suitable for a DLQ ``reason`` header.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, kw_only=True, slots=True)
class InstrumentParams:
    """The pricing parameters of one instrument.

    Attributes:
        spread_bps: minimum spread, basis points of mid, in [0, 10000).
        skew_bps: shift of mid, basis points, in (-10000, 10000); positive raises both sides.
        tick_size: price increment, > 0.
    """

    spread_bps: float
    skew_bps: float
    tick_size: Decimal

    def __post_init__(self) -> None:
        if not 0 <= self.spread_bps < 10_000:
            raise ConfigError("InstrumentParams", "spread_bps", "must be in [0, 10000)")
        if not abs(self.skew_bps) < 10_000:
            raise ConfigError("InstrumentParams", "skew_bps", "must be in (-10000, 10000)")
        if not (self.tick_size.is_finite() and self.tick_size > 0):
            raise ConfigError("InstrumentParams", "tick_size", "must be a positive decimal")


class Price(wire.Price, frozen=True, kw_only=True):
    """A published price: the wire contract's price (:class:`pricing_ha.wire.Price`, whose
    fields and rules it has); its canonical bytes are :func:`encode_price`.

    A frozen struct rather than a frozen dataclass: created in C (also straight from JSON by
    :func:`decode_price`), about ten times cheaper, which matters at two per price on the
    relay's hot path and one on each publisher's.

    Attributes:
        instrument: the symbol, also the Kafka key.
        seq: the source quote's sequence number (the pipeline's dedupe key).
        bid: published bid, a multiple of the tick size.
        ask: published ask, a multiple of the tick size, above bid.
        mid: midpoint of bid and ask.
        source_time_ns: the source quote's time, Unix epoch nanoseconds.
        epoch: the source quote's epoch (the feed's start, Unix ms; 0: a feed without epochs).
    """

    @property
    def position(self) -> int:
        """``(epoch, seq)`` as one ordered integer (:mod:`pricing_ha.publishing.epochs`)."""
        return position(self.epoch, self.seq)


def _decimal(x: float) -> Decimal:
    # repr() is the shortest string that round-trips, so 1.08501 enters as exactly 1.08501
    # rather than as the binary float's 1.0850099999999999...
    return Decimal(repr(x))


def price_quote(q: Quote, p: InstrumentParams) -> Price:
    """Prices one quote. Pure and deterministic (see the module docstring for the formula).

    Args:
        q: a valid quote (see :func:`pricing_ha.publishing.quotes.validate_quote`).
        p: the instrument's parameters.

    Returns:
        The price.

    Raises:
        InvalidQuoteError: if the priced bid would round down to zero ticks.
    """
    with localcontext(_CONTEXT):
        bid, ask = _decimal(q.bid), _decimal(q.ask)
        mid = (bid + ask) / _TWO
        mid += mid * _decimal(p.skew_bps) / _BPS
        half = max((ask - bid) / _TWO, mid * _decimal(p.spread_bps) / _BPS / _TWO)
        tick = p.tick_size
        bid_ticks = int(((mid - half) / tick).to_integral_value(rounding=ROUND_FLOOR))
        ask_ticks = int(((mid + half) / tick).to_integral_value(rounding=ROUND_CEILING))
        ask_ticks = max(ask_ticks, bid_ticks + 1)
        if bid_ticks < 1:
            raise InvalidQuoteError(
                f"priced bid of {q.instrument} seq {q.seq} is below one tick ({tick})"
            )
        out_bid, out_ask = bid_ticks * tick, ask_ticks * tick
        out_mid = (out_bid + out_ask) / _TWO
    return Price(
        instrument=q.instrument,
        seq=q.seq,
        bid=float(out_bid),
        ask=float(out_ask),
        mid=float(out_mid),
        source_time_ns=q.source_time_ns,
        epoch=q.epoch,
    )


def encode_price(p: Price) -> bytes:
    """Serialises a price canonically: compact JSON, sorted keys, exactly seven fields.

    Equal prices give equal bytes in any process (floats are written in their shortest
    round-trip form), which is what lets the relay treat P1's and P2's copies as the same
    message.
    """
    return orjson.dumps(
        {
            "instrument": p.instrument,
            "epoch": p.epoch,
            "seq": p.seq,
            "bid": p.bid,
            "ask": p.ask,
            "mid": p.mid,
            "source_time_ns": p.source_time_ns,
        },
        option=orjson.OPT_SORT_KEYS,
    )


def decode_price(data: bytes | None) -> Price:
    """Decodes a value written by :func:`encode_price`.

    Unknown extra fields are ignored (a newer writer may add some); a value without ``epoch``
    (an older writer) has epoch 0.

    Raises:
        InvalidPriceError: for a missing value, invalid JSON, missing or wrongly typed fields,
            non-finite or non-positive prices, a crossed price, ``seq`` or ``epoch`` out of
            range.
    """
    if data is None:
        raise InvalidPriceError("empty message value")
    try:
        # The wire contract's rules decode a well-formed price in one pass, straight into a
        # Price (a number beyond a float's range is refused there: nothing non-finite gets
        # through); anything refused is read again by the strict reader, which says precisely
        # what is wrong.
        price = _PRICE.decode(data)
    except msgspec.MsgspecError:
        price = _decode_slowly(data)
    if not price.instrument:
        raise InvalidPriceError("invalid price: empty instrument")
    if not 1 <= price.seq <= MAX_SEQ:
        raise InvalidPriceError(f"invalid price: seq out of range: {price.seq}")
    if not 0 <= price.epoch <= MAX_EPOCH:
        raise InvalidPriceError(f"invalid price: epoch out of range: {price.epoch}")
    if not 0 < price.bid <= price.ask:
        raise InvalidPriceError(f"invalid price: bid {price.bid!r}, ask {price.ask!r}")
    return price


_PRICE = msgspec.json.Decoder(Price)


def _decode_slowly(data: bytes) -> Price:
    """A price the typed decoder refused, read field by field for the reason it is invalid."""
    try:
        obj = load_object(data)
        price = Price(
            instrument=get_str(obj, "instrument"),
            seq=get_int(obj, "seq"),
            bid=get_float(obj, "bid"),
            ask=get_float(obj, "ask"),
            mid=get_float(obj, "mid"),
            source_time_ns=get_int(obj, "source_time_ns"),
            epoch=get_int(obj, "epoch") if "epoch" in obj else 0,
        )
    except WireFormatError as exc:
        raise InvalidPriceError(f"invalid price: {exc}") from exc
    return price


class ParamsBook:
    """Resolves each instrument's :class:`InstrumentParams`: its override, else the defaults.

    Overrides are resolved once, up front, so :meth:`params_for` is a dictionary look-up.
    Instruments never seen in the configuration (new symbols on ``md.quotes``) get the defaults.
    :meth:`price` computes :func:`price_quote`'s result in integer arithmetic where that is
    provably the same (:mod:`._exact_pricing`), prepared once per set of parameters: nothing is
    kept per instrument beyond the configured overrides.
    """

    def __init__(
        self,
        defaults: InstrumentParams,
        overrides: Mapping[str, InstrumentOverride] | None = None,
    ) -> None:
        """Creates a book.

        Args:
            defaults: parameters of every instrument without an override.
            overrides: per-instrument overrides; their unset fields fall back to ``defaults``.
        """
        self.defaults = defaults
        resolved: dict[str, InstrumentParams] = {}
        for instrument, o in (overrides or {}).items():
            resolved[instrument] = InstrumentParams(
                spread_bps=defaults.spread_bps if o.spread_bps is None else o.spread_bps,
                skew_bps=defaults.skew_bps if o.skew_bps is None else o.skew_bps,
                tick_size=defaults.tick_size if o.tick_size is None else o.tick_size,
            )
        self._resolved: Mapping[str, InstrumentParams] = types.MappingProxyType(resolved)
        self._default_pricer = _pricer(defaults)
        self._pricers = {instrument: _pricer(p) for instrument, p in resolved.items()}

    @classmethod
    def from_config(cls, cfg: PricingConfig) -> ParamsBook:
        """Builds the book from the ``[pricing]`` section."""
        defaults = InstrumentParams(
            spread_bps=cfg.spread_bps, skew_bps=cfg.skew_bps, tick_size=cfg.tick_size
        )
        return cls(defaults, cfg.instruments)

    def params_for(self, instrument: str) -> InstrumentParams:
        """Returns the parameters of ``instrument``."""
        return self._resolved.get(instrument, self.defaults)

    def overridden(self) -> Mapping[str, InstrumentParams]:
        """Returns the instruments with overrides and their resolved parameters."""
        return self._resolved

    def price(self, q: Quote) -> Price:
        """Prices ``q`` with its instrument's parameters: :func:`price_quote`'s result.

        Raises:
            InvalidQuoteError: as :func:`price_quote`.
        """
        pricer = self._pricers.get(q.instrument, self._default_pricer)
        ticks = pricer.ticks(q.bid, q.ask)
        if ticks is None:  # not provably exact in integers: the decimal definition
            return price_quote(q, self.params_for(q.instrument))
        bid_ticks, ask_ticks = ticks
        ask_ticks = max(ask_ticks, bid_ticks + 1)
        if bid_ticks < 1:
            raise InvalidQuoteError(
                f"priced bid of {q.instrument} seq {q.seq} is below one tick ({pricer.tick})"
            )
        return Price(
            instrument=q.instrument,
            seq=q.seq,
            bid=pricer.to_float(bid_ticks),
            ask=pricer.to_float(ask_ticks),
            mid=pricer.half_to_float(bid_ticks + ask_ticks),
            source_time_ns=q.source_time_ns,
            epoch=q.epoch,
        )


def _pricer(p: InstrumentParams) -> ExactPricer:
    return ExactPricer(p.spread_bps, p.skew_bps, p.tick_size)
