"""Quotes and prices carry the feed's epoch; publishers order and bound by (epoch, seq)."""

from __future__ import annotations

import orjson
import pytest

from pricing_ha.config import AppConfig, FeedConfig, SequenceConfig
from pricing_ha.errors import ConfigError
from pricing_ha.feed.producer import feed_epoch
from pricing_ha.feed.sources import SyntheticMarket
from pricing_ha.publishing.epochs import position
from pricing_ha.publishing.pricing import InvalidPriceError, Price, decode_price, encode_price
from pricing_ha.publishing.quotes import (
    InvalidQuoteError,
    Quote,
    SequenceGuard,
    encode_quote,
    parse_quote,
)

E1, E2 = 1_700_000_000_000, 1_700_000_900_000
NOW_MS = E2 + 1_000


def _guard() -> SequenceGuard:
    return SequenceGuard(max_seq_jump=1000, max_epoch_skew_ms=60_000, clock_ms=lambda: NOW_MS)


def test_quotes_and_prices_round_trip_their_epoch_and_default_to_zero() -> None:
    """epoch survives encode/parse; a value without it (an older feed) decodes as epoch 0."""
    q = Quote(instrument="X", seq=3, bid=1.0, ask=1.1, source_time_ns=7, epoch=E1)
    assert parse_quote(encode_quote(q), b"X") == q
    old = orjson.dumps({"instrument": "X", "seq": 3, "bid": 1.0, "ask": 1.1, "source_time_ns": 7})
    assert parse_quote(old, b"X").epoch == 0
    p = Price(instrument="X", seq=3, bid=1.0, ask=1.1, mid=1.05, source_time_ns=7, epoch=E1)
    assert decode_price(encode_price(p)) == p
    assert b'"epoch":%d' % E1 in encode_price(p)
    assert decode_price(encode_price(p).replace(b'"epoch":%d,' % E1, b"")).epoch == 0


@pytest.mark.parametrize("epoch", [-1, 2**63, True, 1.5])
def test_an_epoch_out_of_range_or_not_an_integer_is_refused(epoch: object) -> None:
    """Quotes and prices refuse an epoch that is negative, too large or not an integer."""
    body = {"instrument": "X", "seq": 3, "bid": 1.0, "ask": 1.1, "source_time_ns": 7}
    with pytest.raises(InvalidQuoteError, match="epoch"):
        parse_quote(orjson.dumps({**body, "epoch": epoch}), b"X")
    with pytest.raises(InvalidPriceError, match="epoch"):
        decode_price(orjson.dumps({**body, "mid": 1.05, "epoch": epoch}))


def test_a_restarted_feed_is_accepted_from_seq_1_of_its_new_epoch() -> None:
    """After E1 seq 900, E2 seq 1 is a new stream; E1 again is backward."""
    guard = _guard()
    assert guard.check("X", 900, E1).ok
    check = guard.check("X", 1, E2)
    assert check.ok
    assert check.gap == 0
    assert guard.last("X") == position(E2, 1)
    assert "backward seq 901@" in (guard.check("X", 901, E1).reason or "")


def test_a_max_seq_quote_is_dead_lettered_and_the_stream_goes_on() -> None:
    """Seq 2^63-1 after seq 10 is refused (the next quote does not continue it); 11 is not."""
    guard = _guard()
    assert guard.check("X", 10, E1).ok
    assert "accepted only if the next quote continues" in (
        guard.check("X", 2**63 - 1, E1).reason or ""
    )
    assert guard.check("X", 11, E1).ok
    assert guard.last("X") == position(E1, 11)


def test_a_real_jump_costs_one_quote_when_the_next_continues_from_it() -> None:
    """A jump past the bound is refused once, then accepted when the next quote continues it."""
    guard = _guard()
    assert guard.check("X", 10, E1).ok
    assert not guard.check("X", 5000, E1).ok
    check = guard.check("X", 5001, E1)
    assert check.ok
    assert check.gap == 4990


def test_an_epoch_far_ahead_of_the_clock_is_always_refused() -> None:
    """An epoch beyond the skew bound is refused, even when the next quote continues it."""
    guard = _guard()
    assert guard.check("X", 10, E1).ok
    future = NOW_MS + 3_600_000
    assert "ahead of the clock" in (guard.check("X", 1, future).reason or "")
    assert not guard.check("X", 2, future).ok
    assert guard.check("X", 11, E1).ok


def test_the_feed_stamps_its_start_time_unless_configured() -> None:
    """feed_epoch is the start time in ms, or [feed] epoch_ms; the market stamps every quote."""
    cfg = AppConfig()
    assert feed_epoch(cfg, clock_ns=lambda: 1_234_567_000_000) == 1_234_567
    fixed = AppConfig(feed=FeedConfig(epoch_ms=42))
    assert feed_epoch(fixed) == 42
    quotes = SyntheticMarket(["EURUSD"], seed=1, epoch=E1).next_round(0)
    assert [(q.epoch, q.seq) for q in quotes] == [(E1, 1)]


def test_sequence_bounds_are_validated() -> None:
    """[sequence] refuses a zero jump bound and a negative skew; [feed] a negative epoch."""
    with pytest.raises(ConfigError, match="max_seq_jump"):
        SequenceConfig(max_seq_jump=0)
    with pytest.raises(ConfigError, match="max_epoch_skew_ms"):
        SequenceConfig(max_epoch_skew_ms=-1)
    with pytest.raises(ConfigError, match="epoch_ms"):
        FeedConfig(epoch_ms=-1)
