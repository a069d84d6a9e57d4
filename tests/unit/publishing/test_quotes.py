"""Quote parsing, validation, encoding and sequence checking."""

from __future__ import annotations

import orjson
import pytest

from pricing_ha.errors import PricingError
from pricing_ha.publishing.quotes import (
    InvalidQuoteError,
    Quote,
    SequenceGuard,
    encode_quote,
    parse_quote,
    validate_quote,
)

GOOD = {"instrument": "EURUSD", "seq": 7, "bid": 1.08501, "ask": 1.08503, "source_time_ns": 5}


def msg(**changes: object) -> bytes:
    """Returns a quote message with some fields changed (None removes a field)."""
    body = {**GOOD, **changes}
    return orjson.dumps({k: v for k, v in body.items() if v is not None})


def test_parse_valid_quote() -> None:
    """A well-formed keyed message parses into the expected Quote."""
    q = parse_quote(msg(), b"EURUSD")
    assert q == Quote(instrument="EURUSD", seq=7, bid=1.08501, ask=1.08503, source_time_ns=5)


def test_integer_prices_are_accepted_as_floats() -> None:
    """JSON integers are valid prices and become floats."""
    q = parse_quote(msg(bid=100, ask=101), b"EURUSD")
    assert (q.bid, q.ask) == (100.0, 101.0)
    assert isinstance(q.bid, float)


def test_unknown_extra_fields_are_ignored() -> None:
    """Sources may add fields without breaking publishers."""
    assert parse_quote(msg(venue="X"), b"EURUSD").seq == 7


def test_encode_parse_round_trip() -> None:
    """encode_quote output parses back to the same quote."""
    q = Quote(instrument="AAPL", seq=1, bid=189.5, ask=189.52, source_time_ns=123)
    assert parse_quote(encode_quote(q), b"AAPL") == q


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty message value"),
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (
            b'{"instrument": "EURUSD", "seq": 7, "bid": 1e400, "ask": 2, "source_time_ns": 1}',
            "not valid JSON",
        ),
        (msg(seq=None), "missing field 'seq'"),
        (msg(bid=None), "missing field 'bid'"),
        (msg(source_time_ns=None), "missing field 'source_time_ns'"),
        (msg(seq="7"), "'seq' must be an integer"),
        (msg(seq=7.0), "'seq' must be an integer"),
        (msg(seq=True), "'seq' must be an integer"),
        (msg(bid="1.1"), "'bid' must be a number"),
        (msg(ask=False), "'ask' must be a number"),
        (msg(instrument=5), "'instrument' must be a string"),
        (msg(seq=0), "seq must be in 1.."),
        (msg(seq=2**63), "seq must be in 1.."),
        (msg(bid=0), "bid must be positive"),
        (msg(bid=-1.0), "bid must be positive"),
        (msg(bid=1.2, ask=1.1), "crossed quote"),
        (msg(source_time_ns=-1), "source_time_ns must be >= 0"),
        (msg(instrument=""), "blank"),
    ],
)
def test_invalid_quotes_are_rejected_with_reason(value: bytes | None, reason: str) -> None:
    """Each kind of bad input raises InvalidQuoteError carrying a specific reason."""
    with pytest.raises(InvalidQuoteError) as info:
        parse_quote(value, b"EURUSD")
    assert reason in info.value.reason
    assert isinstance(info.value, PricingError)


def test_blank_instrument_with_matching_key_is_rejected() -> None:
    """An empty instrument is invalid even when the key matches it."""
    with pytest.raises(InvalidQuoteError, match="blank"):
        parse_quote(msg(instrument=""), b"")


def test_key_must_match_instrument() -> None:
    """A message keyed by another instrument is rejected (it sits on the wrong partition)."""
    with pytest.raises(InvalidQuoteError, match="does not match"):
        parse_quote(msg(), b"GBPUSD")


def test_missing_key_is_rejected() -> None:
    """An unkeyed quote is rejected."""
    with pytest.raises(InvalidQuoteError, match="no key"):
        parse_quote(msg(), None)


def test_locked_quote_is_valid() -> None:
    """bid == ask is a locked, not crossed, market and is accepted."""
    assert parse_quote(msg(bid=1.1, ask=1.1), b"EURUSD").ask == 1.1


def test_validate_rejects_non_finite_prices() -> None:
    """NaN and infinity fail validation (they can arrive from CSV or code)."""
    with pytest.raises(InvalidQuoteError, match="non-finite"):
        validate_quote(Quote(instrument="X", seq=1, bid=float("nan"), ask=1.0, source_time_ns=0))
    with pytest.raises(InvalidQuoteError, match="non-finite"):
        validate_quote(Quote(instrument="X", seq=1, bid=1.0, ask=float("inf"), source_time_ns=0))


def test_sequence_guard_accepts_increasing_and_reports_gaps() -> None:
    """Increasing seqs pass; a forward jump is accepted with its gap size."""
    guard = SequenceGuard()
    assert guard.check("A", 5).ok  # first seen: accepted wherever it starts
    assert guard.check("A", 6).gap == 0
    jump = guard.check("A", 9)
    assert jump.ok
    assert jump.gap == 2
    assert guard.gaps == 2
    assert guard.last("A") == 9


def test_sequence_guard_rejects_repeated_and_backward() -> None:
    """A repeated or lower seq is rejected with a reason and does not move the mark."""
    guard = SequenceGuard()
    guard.check("A", 5)
    repeated = guard.check("A", 5)
    backward = guard.check("A", 3)
    assert not repeated.ok
    assert repeated.reason is not None
    assert "repeated seq 5" in repeated.reason
    assert backward.reason is not None
    assert "backward seq 3" in backward.reason
    assert guard.last("A") == 5


def test_sequence_guard_tracks_instruments_independently() -> None:
    """Each instrument has its own sequence."""
    guard = SequenceGuard()
    guard.check("A", 10)
    assert guard.check("B", 1).ok
    assert guard.last("B") == 1


def test_sequence_guard_forget() -> None:
    """Forgetting an instrument lets its next quote start a new sequence."""
    guard = SequenceGuard()
    guard.check("A", 10)
    guard.check("B", 10)
    guard.forget({"A"})
    assert guard.check("A", 1).ok
    assert not guard.check("B", 1).ok
    guard.forget()
    assert guard.last("B") is None
