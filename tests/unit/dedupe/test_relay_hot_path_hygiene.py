"""The relay's hot path writes only what it wrote, and bounds its per-instrument state
(issue 45, items 3 and 5)."""

from __future__ import annotations

import orjson

from pricing_ha.dedupe.relayed import RELAYED_HEADERS
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.publishing.pricing import Price, encode_price
from tests.unit.dedupe.relay_hot_path import Relay


def test_forged_headers_do_not_reach_prices_and_seq_is_the_values() -> None:
    """A raw price with forged seq, control and unknown headers is relayed with only
    allow-listed headers, the value's seq and the canonical value."""
    relay = Relay()
    price = Price(instrument="EURUSD", seq=3, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
    value = orjson.dumps({**orjson.loads(encode_price(price)), "note": "extra"})
    forged = [
        ("seq", b"9223372036854775807"),
        (CONTROL_HEADER, b"release"),
        ("term", b"0"),
        ("marker", b"r9/x:1"),
        ("x-unknown", b"1"),
        ("group", b"p1"),
        ("member", b"a"),
    ]
    relay.hot.process([relay.raw("EURUSD", 3, forged, value)])
    [out] = relay.produced("prices")
    names = [name for name, _ in out["headers"]]
    assert set(names) <= set(RELAYED_HEADERS), names
    assert dict(out["headers"])["seq"] == b"3"
    assert out["key"] == b"EURUSD"
    assert out["value"] == encode_price(price)


def test_new_instruments_beyond_the_limit_are_dead_lettered_and_known_ones_flow() -> None:
    """A flood of names fills the partition to its limit; later new names are dead-lettered
    with a reason, and the instruments already known keep flowing, no mark forgotten."""
    relay = Relay(max_instruments=100)
    relay.hot.process([relay.raw("EURUSD", 1)])
    relay.hot.process([relay.raw(f"FLOOD{i}", 1) for i in range(500)])
    relay.hot.process([relay.raw("EURUSD", 2), relay.raw("EURUSD", 1)])
    arbiter = relay.hot.arbiters[0]
    assert arbiter.instrument_count() == 100
    prices = relay.produced("prices")
    assert [r["key"] for r in prices].count(b"EURUSD") == 2  # seq 1 once, seq 2 once
    assert len(prices) == 100 + 1
    dead = relay.produced("prices.raw.dlq")
    assert len(dead) == 401
    reason = dict(dead[0]["headers"])["reason"].decode()
    assert reason.startswith("instrument limit"), reason
    assert len(reason) <= 256
    assert relay.stats.instruments_refused == 401
    assert arbiter.high_water("EURUSD") == 2


def test_an_overlong_instrument_name_is_dead_lettered() -> None:
    """A name longer than 64 bytes gets no state: it is dead-lettered with a reason."""
    relay = Relay()
    relay.hot.process([relay.raw("X" * 65, 1)])
    assert not relay.produced("prices")
    [dead] = relay.produced("prices.raw.dlq")
    assert b"longer than 64" in dict(dead["headers"])["reason"]
