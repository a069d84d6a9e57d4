"""Only what the relay wrote reaches ``prices``: allow-listed headers, seq from the value,
canonical values, and one rule for control records (issue 45, item 3)."""

from __future__ import annotations

from typing import Any

import orjson
from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from pricing_ha.dedupe.control import RELEASE, TAKEOVER, control_kind
from pricing_ha.dedupe.records import parse_raw_record
from pricing_ha.dedupe.relayed import RELAYED_HEADERS, relayed_headers
from pricing_ha.kafka.headers import CONTROL_HEADER, is_control
from pricing_ha.publishing.pricing import Price, decode_price, encode_price
from tests.unit.dedupe.standby_log import TOKEN, Log, read_to_end, tail_of

PRICE = Price(instrument="EURUSD", seq=7, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
TRACEPARENT = b"00-" + b"a" * 32 + b"-" + b"b" * 16 + b"-01"


def _raw(value: bytes, headers: list[tuple[str, Any]], key: bytes | None = b"EURUSD") -> Message:
    return Message(topic="prices.raw", partition=0, offset=3, key=key, value=value, headers=headers)


def test_relayed_headers_keep_only_the_allow_list_and_take_seq_from_the_value() -> None:
    """Forged seq, control and unknown headers are dropped; the seq header is the value's."""
    raw = [
        ("seq", b"9223372036854775807"),
        (CONTROL_HEADER, b"takeover"),
        ("marker", b"r9/forged:1"),
        ("term", b"0"),
        ("x-evil", b"1"),
        ("tracestate", b"k=v"),
        ("group", b"p1"),
        ("member", b"a"),
        ("publish_ns", b"123"),
        ("traceparent", TRACEPARENT),
    ]
    got = dict(relayed_headers(raw, 7))
    assert got == {
        "seq": b"7",
        "group": b"p1",
        "member": b"a",
        "publish_ns": b"123",
        "traceparent": TRACEPARENT,
    }
    assert set(got) <= set(RELAYED_HEADERS)


def test_relayed_headers_drop_malformed_allowed_ones() -> None:
    """An over-long identity, a non-digit publish_ns or a malformed traceparent is dropped."""
    raw: list[tuple[str, str | bytes | None]] = [
        ("group", b"p" * 65),
        ("member", "b"),
        ("publish_ns", "²"),
        ("traceparent", b"00-zz-01"),
    ]
    assert relayed_headers(raw, 1) == [("seq", b"1"), ("member", b"b")]
    assert relayed_headers(None, 2) == [("seq", b"2")]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["seq", "group", "member", "publish_ns", "traceparent", "z", ""]),
            st.one_of(st.none(), st.binary(max_size=80), st.text(max_size=80)),
        ),
        max_size=12,
    ),
    st.integers(1, 2**63 - 1),
)
def test_relayed_headers_never_carry_anything_off_the_list(
    raw: list[tuple[str, Any]], seq: int
) -> None:
    """Whatever the raw headers, the output has the value's seq first and allowed names only."""
    got = relayed_headers(raw, seq)
    assert got[0] == ("seq", str(seq).encode())
    assert [name for name, _ in got[1:]] == [n for n in dict(got[1:]) if n != "seq"]
    assert {name for name, _ in got} <= set(RELAYED_HEADERS)


def test_parse_raw_record_gives_the_canonical_value() -> None:
    """Extra fields and odd spacing in a raw value are not what the relay writes."""
    doc = orjson.loads(encode_price(PRICE))
    raw_value = b"  " + orjson.dumps({**doc, "extra": "x" * 100}) + b"\n"
    fields = parse_raw_record(_raw(raw_value, []), [])
    assert fields.value == encode_price(PRICE)
    assert decode_price(fields.value) == PRICE


def test_one_rule_for_control_records() -> None:
    """A control record has no key and the control header; a keyed record never is one."""
    assert is_control(None, [(CONTROL_HEADER, b"takeover")])
    assert not is_control(b"EURUSD", [(CONTROL_HEADER, b"takeover")])
    assert not is_control(None, [("seq", b"1")])
    assert not is_control(None, None)
    assert control_kind(b"EURUSD", [(CONTROL_HEADER, b"release")]) is None
    assert control_kind(None, [(CONTROL_HEADER, "release"), ("term", b"12")]) == (
        RELEASE,
        {CONTROL_HEADER: b"release", "term": b"12"},
    )


def test_the_standby_takes_seq_from_the_value_not_the_header() -> None:
    """A price whose seq header says 2^63-1 moves the mark only to the value's seq."""
    log = Log(1)
    log.append(
        0,
        key=b"EURUSD",
        value=encode_price(PRICE),
        headers=[("seq", str(2**63 - 1).encode())],
    )
    tail = tail_of(log)
    read_to_end(tail, log)
    assert tail.views[0].high == {"EURUSD": 7}


def test_a_keyed_record_with_a_control_header_is_a_price_to_the_standby() -> None:
    """A takeover header on a keyed record starts no term: it folds as a price."""
    log = Log(1)
    log.control(0, TAKEOVER, TOKEN + ":1")
    log.append(
        0,
        key=b"EURUSD",
        value=encode_price(PRICE),
        headers=[(CONTROL_HEADER, TAKEOVER), ("marker", b"r9/forged:1")],
    )
    tail = tail_of(log)
    read_to_end(tail, log)
    view = tail.views[0]
    assert view.term == 0
    assert view.high == {"EURUSD": 7}
    assert view.last_data == 1
    assert not view.requested_after(0, TOKEN)
