"""What the relay's hot path writes for each emitted copy, and what a dropped copy costs."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from pricing_ha.dedupe import hot_path, records, relayed
from pricing_ha.publishing.pricing import Price, encode_price
from tests.unit.dedupe.relay_hot_path import Relay

PRICE = Price(instrument="EURUSD", seq=1, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
TRACEPARENT = b"00-" + b"a" * 32 + b"-" + b"b" * 16 + b"-00"  # well-formed, not sampled


def _headers(group: bytes, publish_ns: bytes = b"123") -> list[tuple[str, Any]]:
    return [
        ("seq", b"999"),  # forged: the relay writes the value's seq
        ("x-extra", b"1"),
        ("group", group),
        ("member", b"a"),
        ("publish_ns", publish_ns),
        ("traceparent", TRACEPARENT),
    ]


def test_an_emitted_copy_has_the_canonical_value_and_the_allowed_headers() -> None:
    """The first copy is written with the canonical value and allow-listed headers, in order;
    the second group's copy of the same seq is dropped."""
    relay = Relay()
    loose = b'{ "instrument":"EURUSD","seq":1,"bid":1.0,"ask":1.1,"mid":1.05,"source_time_ns":5}'
    relay.hot.process(
        [
            relay.raw("EURUSD", 1, headers=_headers(b"p1"), value=loose),
            relay.raw("EURUSD", 1, headers=_headers(b"p2", b"456")),
        ]
    )
    (record,) = relay.produced("prices")
    assert (record["key"], record["value"], record["partition"]) == (
        b"EURUSD",
        encode_price(PRICE),
        0,
    )
    names = [name for name, _ in record["headers"]]
    assert names == ["seq", "group", "member", "publish_ns", "traceparent", "relay", "relay_ns"]
    values = dict(record["headers"])
    assert (values["seq"], values["group"], values["member"], values["publish_ns"]) == (
        b"1",
        b"p1",
        b"a",
        b"123",
    )
    assert (values["traceparent"], values["relay"]) == (TRACEPARENT, b"r1")
    assert relay.stats.relayed == 1
    assert relay.hot.arbiters[0].duplicates == 1


def test_a_dropped_copy_builds_neither_value_nor_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of two copies of each seq, only the emitted one has its output encoded and its headers
    allow-listed."""
    built: list[int] = []
    encoded: list[int] = []
    real_headers, real_encode = relayed.relayed_headers, encode_price

    def headers(raw: Any, seq: int) -> Any:
        built.append(seq)
        return real_headers(raw, seq)

    def encode(price: Price) -> bytes:
        encoded.append(price.seq)
        return real_encode(price)

    for module in (records, hot_path):  # wherever the hot path calls it from
        if hasattr(module, "relayed_headers"):
            monkeypatch.setattr(module, "relayed_headers", headers)
    monkeypatch.setattr(records, "encode_price", encode)
    relay = Relay()
    batch = []
    for seq in (1, 2, 3):
        batch += [
            relay.raw("EURUSD", seq, headers=_headers(b"p1")),
            relay.raw("EURUSD", seq, headers=_headers(b"p2")),
        ]
    relay.hot.process(batch)
    assert [r["value"] for r in relay.produced("prices")] == [
        real_encode(msgspec.structs.replace(PRICE, seq=s)) for s in (1, 2, 3)
    ]
    assert [dict(r["headers"])["seq"] for r in relay.produced("prices")] == [b"1", b"2", b"3"]
    assert built == [1, 2, 3]
    assert encoded == [1, 2, 3]


def test_a_sampled_copy_is_relayed_inside_its_spans() -> None:
    """A copy whose traceparent is sampled takes the traced path (its item is re-made with
    its process span's context) and is relayed once, like an unsampled one."""
    sampled = b"00-" + b"c" * 32 + b"-" + b"d" * 16 + b"-01"
    relay = Relay()
    headers = [(n, sampled if n == "traceparent" else v) for n, v in _headers(b"p1")]
    relay.hot.process(
        [
            relay.raw("EURUSD", 1, headers=headers),
            relay.raw("EURUSD", 1, headers=_headers(b"p2")),
        ]
    )
    (record,) = relay.produced("prices")
    assert (record["value"], dict(record["headers"])["group"]) == (encode_price(PRICE), b"p1")
    assert "traceparent" in dict(record["headers"])
    assert relay.stats.relayed == 1
