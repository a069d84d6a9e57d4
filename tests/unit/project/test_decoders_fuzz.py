"""Property-based fuzzing of the decoders a hostile record reaches, and of dead-letter bounds.

Each decoder, given any bytes and headers, returns a value or raises its module's own error
class, never anything else: an exception of another class raises out of a consuming loop and
kills the role (the drill's ``ValueError`` on "²"). Dead letters stay within their bounds for
any input.
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from pricing_ha.dedupe.control import PartitionView, control_kind, seq_of
from pricing_ha.dedupe.records import parse_raw_record
from pricing_ha.kafka.dead_letter import (
    KEY_CAP_BYTES,
    MAX_REASON_BYTES,
    PAYLOAD_CAP_BYTES,
    bounded_reason,
    build_dead_letter,
)
from pricing_ha.kafka.headers import CONTROL_HEADER, header_dict, header_int, header_text
from pricing_ha.publishing.pricing import InvalidPriceError, Price, decode_price, encode_price
from pricing_ha.publishing.quotes import InvalidQuoteError, Quote, parse_quote
from pricing_ha.subscribing.delivery import price_headers
from tests import strategies

FIELDS = ["instrument", "seq", "bid", "ask", "mid", "source_time_ns", "epoch"]
json_values = strategies.json_values(int_bits=70, max_size=3, max_leaves=8)
# Objects shaped like quotes and prices (the interesting half of the input space), then any bytes.
objects = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), json_values, max_size=8)
# Valid prices too, so that a raw record gets past its value to its headers.
valid_prices = st.builds(
    Price,
    instrument=st.just("EURUSD"),
    seq=st.integers(min_value=1, max_value=2**63 - 1),
    bid=st.just(1.0),
    ask=st.just(1.5),
    mid=st.just(1.25),
    source_time_ns=st.integers(min_value=0, max_value=2**63 - 1),
).map(encode_price)
payloads = objects.map(lambda o: json.dumps(o).encode()) | st.binary(max_size=300) | valid_prices
header_values = (
    st.none()
    | st.binary(max_size=40)
    | st.sampled_from(
        [b"\xff", "²".encode(), "٣".encode(), b"1" * 30, b"9" * 5000, b"-5", b"007", b" 1"]
    )
)
header_names = st.sampled_from(
    ["seq", "group", "member", "publish_ns", "traceparent", "term", "below", "marker"]
) | st.text(max_size=8)
headers = st.lists(st.tuples(header_names, header_values), max_size=6)
keys = st.sampled_from([b"EURUSD", "é".encode()]) | st.none() | st.binary(max_size=20)


def message(key: bytes | None, value: bytes | None, hdrs: list[tuple[str, Any]]) -> Message:
    """A record of prices.raw or prices."""
    return Message(topic="t", partition=0, offset=1, key=key, value=value, headers=hdrs)


@given(payloads, keys)
def test_parse_quote_returns_a_quote_or_its_own_error(value: bytes, key: bytes | None) -> None:
    """Any value and key: a Quote or InvalidQuoteError, nothing else."""
    try:
        got: object = parse_quote(value, key)
    except InvalidQuoteError as exc:
        got = exc.reason
    assert isinstance(got, Quote | str)


@given(payloads)
def test_decode_price_returns_a_price_or_its_own_error(value: bytes) -> None:
    """Any value: a Price or InvalidPriceError, nothing else."""
    try:
        got: object = decode_price(value)
    except InvalidPriceError as exc:
        got = exc.reason
    assert isinstance(got, Price | str)


@given(keys, payloads | st.none(), headers)
def test_parse_raw_record_returns_a_record_or_its_own_error(
    key: bytes | None, value: bytes | None, hdrs: list[tuple[str, Any]]
) -> None:
    """Any key, value and headers on prices.raw: parsed or InvalidPriceError."""
    msg = message(key, value, hdrs)
    try:
        instrument, seq, _source, _source_ns, publish_ns, _value, epoch = parse_raw_record(
            msg, msg.headers()
        )
    except InvalidPriceError:
        return
    assert isinstance(instrument, str)
    assert 1 <= seq < 2**63
    assert 0 <= epoch < 2**63
    assert 0 <= publish_ns < 10**19


@given(keys, payloads | st.none(), headers)
def test_the_standby_reads_any_price_record(
    key: bytes | None, value: bytes | None, hdrs: list[tuple[str, Any]]
) -> None:
    """seq_of on any record: an (instrument, seq) within int64, or None."""
    msg = message(key, value, hdrs)
    got = seq_of(msg)
    assert got is None or 0 <= got[1] < 2**63


@given(headers, st.sampled_from([b"takeover", b"release", b"handover", b"kept", b"probe"]))
def test_the_standby_folds_any_control_record(hdrs: list[tuple[str, Any]], kind: bytes) -> None:
    """Any headers on a control record fold into the view without raising."""
    control = control_kind(None, [(CONTROL_HEADER, kind), *hdrs])
    assert control is not None
    view = PartitionView()
    view.fold_control(5, control[0], control[1], 1.0)
    view.fold_control(6, b"release", {**control[1], "before": b"unclean"}, 1.0)


@given(headers)
def test_header_helpers_are_total(hdrs: list[tuple[str, Any]]) -> None:
    """header_dict, header_text and header_int never raise; header_int gives int64 or None."""
    header_dict(hdrs)
    for _name, value in hdrs:
        header_text(value)
        number = header_int(value)
        assert number is None or 0 <= number < 10**19


@given(headers)
def test_the_subscriber_reads_any_headers(hdrs: list[tuple[str, Any]]) -> None:
    """The subscriber's header reading never raises; a bad publish_ns is left out and flagged."""
    _source, publish_ns, _trace, bad = price_headers(message(b"K", b"", hdrs))
    assert publish_ns is None or publish_ns >= 0
    if not any(name == "publish_ns" for name, _value in hdrs):
        assert (publish_ns, bad) == (None, False)


@given(st.text(max_size=400), st.integers(min_value=4, max_value=300))
def test_a_bounded_reason_is_valid_utf8_within_its_limit(reason: str, limit: int) -> None:
    """Cut at a character boundary, never longer than the limit, a prefix of the reason."""
    data = bounded_reason(reason, limit)
    assert len(data) <= limit
    text = data.decode()  # valid UTF-8
    stem = text.removesuffix("…")
    assert reason.encode("utf-8", "backslashreplace").decode().startswith(stem)


@given(
    st.text(max_size=2000),
    st.none() | st.integers(min_value=0, max_value=200_000),
    st.none() | st.integers(min_value=0, max_value=5_000),
    st.integers(min_value=0, max_value=2**62),
)
def test_every_dead_letter_is_within_bounds(
    reason: str, value_size: int | None, key_size: int | None, offset: int
) -> None:
    """Whatever the record and reason: reason <= 256 bytes, payload and key capped, sizes and
    the truncation flag recorded."""
    value = None if value_size is None else b"v" * value_size
    key = None if key_size is None else b"k" * key_size
    letter = build_dead_letter(
        reason=reason,
        source_topic="md.quotes",
        source_partition=3,
        source_offset=offset,
        key=key,
        value=value,
        identity=[("member", b"m")],
    )
    named = dict(letter.headers)
    assert len(named["reason"] or b"") <= MAX_REASON_BYTES
    assert len(letter.value or b"") <= PAYLOAD_CAP_BYTES
    assert len(letter.key or b"") <= KEY_CAP_BYTES
    assert named["original.value.size"] == str(-1 if value is None else len(value)).encode()
    cut = (value_size or 0) > PAYLOAD_CAP_BYTES or (key_size or 0) > KEY_CAP_BYTES
    assert named["truncated"] == (b"true" if cut else b"false")
    header_bytes = sum(len(k) + len(v or b"") for k, v in letter.headers)
    assert header_bytes < 1024
