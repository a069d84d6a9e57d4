"""The pricing formula in integer arithmetic, for the publisher's hot path: the same results.

:func:`pricing_ha.publishing.pricing.price_quote` is the definition: decimal arithmetic at 34
significant digits, ~5 µs a quote, most of it spent building and dividing ``Decimal`` objects.
:class:`ExactPricer` computes the same formula on Python integers, each value scaled by one
power of ten ``10**K`` chosen per instrument so that every intermediate value of the formula is
an integer there (the quote's prices are their shortest round-trip decimal forms, the
parameters are exact decimals, and the formula only adds, subtracts, halves, multiplies by a
parameter and divides by 10,000).

**Why the results are identical.** Decimal arithmetic at 34 digits is exact whenever every
intermediate result has at most 34 significant digits; the integer arithmetic here is exact
always. So both compute the same exact values (and so the same tick counts) when that holds,
and :meth:`ExactPricer.ticks` takes the integer path only when it provably does: every
intermediate value of the formula is at most ``2 * 10**4 * (bid + ask)`` in magnitude, so a
quote with ``(bid + ask) * 10**(K + 5 + j) < 10**34`` (``j``: the digits a division by the tick
can add; a tick whose digits have a prime factor other than 2 or 5 divides inexactly and never
takes this path) cannot round anywhere. Otherwise it answers ``None`` and the caller uses the
decimal definition. The published floats are the correctly rounded values of exact decimals in
both (``float(Decimal)`` parses the decimal's string; ``int / int`` is correctly rounded).
``tests/unit/test_exact_pricing.py`` checks the equality over random quotes and parameters.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = ["ExactPricer"]

_LIMIT = 10**34  # IEEE decimal128's 34 digits: the precision of the decimal definition
# Powers of ten by exponent, up to the most decimals the integer path takes on (beyond: the
# decimal definition; a float's repr without an exponent has at most ~21 decimals).
_POW10: tuple[int, ...] = tuple(10**i for i in range(128))


def _exact(x: Decimal) -> tuple[int, int]:
    """``x`` as ``(n, d)`` with ``x == n / 10**d`` and ``d >= 0``."""
    sign, digits, exponent = x.as_tuple()
    n = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    assert isinstance(exponent, int)  # finite: checked by InstrumentParams
    if exponent >= 0:
        return n * 10**exponent, 0
    return n, -exponent


def _two_five_digits(m: int) -> int | None:
    """The smallest ``j`` with ``10**j`` divisible by ``m`` (``m`` > 0), or ``None`` if ``m``
    has a prime factor other than 2 and 5 (a division by it does not terminate)."""
    twos = fives = 0
    while m % 2 == 0:
        m //= 2
        twos += 1
    while m % 5 == 0:
        m //= 5
        fives += 1
    return max(twos, fives) if m == 1 else None


class ExactPricer:
    """One instrument's parameters, prepared for :meth:`ticks` (see the module docstring).

    Args:
        spread_bps: minimum spread, basis points of mid (as in ``InstrumentParams``).
        skew_bps: shift of mid, basis points.
        tick_size: the price increment, a positive finite decimal.
    """

    __slots__ = ("_k", "_scale", "_skew", "_spread", "_tick_exp", "_tick_num", "_usable", "tick")

    def __init__(self, spread_bps: float, skew_bps: float, tick_size: Decimal) -> None:
        """Prepare the integer forms of the parameters."""
        skew_n, skew_d = _exact(Decimal(repr(skew_bps)))
        spread_n, spread_d = _exact(Decimal(repr(spread_bps)))
        tick_n, tick_d = _exact(tick_size)
        # (integer numerator, its power-of-ten denominator incl. the 10,000 of basis points)
        self._skew = (skew_n, skew_d + 4) if skew_n else None
        self._spread = (spread_n, spread_d + 4) if spread_n else None
        # Decimals K beyond the quote's own: 1 for the halving of mid, those of the skew and
        # spread factors (and 1 more for the spread's halving), and enough to hold the tick.
        k = 1
        if self._skew is not None:
            k += self._skew[1]
        if self._spread is not None:
            k += self._spread[1] + 1
        self._k = k
        self._tick_num, self._tick_exp = tick_n, tick_d
        j = _two_five_digits(tick_n) if tick_n > 0 else None
        self._usable = j is not None
        # Any (bid + ask) scaled by 10**(K + quote decimals) at or above this may round.
        self._scale = _LIMIT // 10 ** (5 + (j or 0))
        #: The tick size as configured (for messages).
        self.tick = tick_size

    def ticks(self, bid: float, ask: float) -> tuple[int, int] | None:
        """The priced bid and ask in ticks (before the one-tick minimum), or ``None`` when
        the integer path cannot prove its result equal to the decimal definition's."""
        if not self._usable:
            return None
        # repr(): the shortest round-trip form, as the definition reads a float; an exponent
        # form (1e-05, 1.5e+16) is left to the definition.
        b_whole, b_dot, b_fraction = repr(bid).partition(".")
        a_whole, a_dot, a_fraction = repr(ask).partition(".")
        if not (b_dot and a_dot) or "e" in b_fraction or "e" in a_fraction:
            return None
        bd, ad = len(b_fraction), len(a_fraction)
        quote_d = max(ad, bd)
        quote_d = max(quote_d, self._tick_exp - self._k)
        k = quote_d + self._k  # every value below is an integer times 10**-k
        if k >= len(_POW10):
            return None
        bi = int(b_whole + b_fraction) * _POW10[k - bd]
        ai = int(a_whole + a_fraction) * _POW10[k - ad]
        if bi + ai >= self._scale:
            return None
        mid = (bi + ai) // 2  # exact: K >= 1 spare decimal
        skew = self._skew
        if skew is not None:
            mid += mid * skew[0] // _POW10[skew[1]]  # exact: mid has that many spare decimals
        half = (ai - bi) // 2
        half = max(half, 0)  # the definition's max(.., spread term), spread 0
        spread = self._spread
        if spread is not None:
            spread_half = mid * spread[0] // (2 * _POW10[spread[1]])  # exact: 1 more spare
            half = max(half, spread_half)
        tick = self._tick_num * _POW10[k - self._tick_exp]
        return (mid - half) // tick, -((-(mid + half)) // tick)

    def to_float(self, ticks: int) -> float:
        """``ticks * tick_size`` as the float ``float(Decimal)`` gives (correctly rounded)."""
        return self.half_to_float(2 * ticks)

    def half_to_float(self, twice_ticks: int) -> float:
        """``twice_ticks * tick_size / 2`` as a correctly rounded float (a midpoint). Only
        after :meth:`ticks` answered (the tick's decimals are then within the table)."""
        return twice_ticks * self._tick_num / (2 * _POW10[self._tick_exp])
