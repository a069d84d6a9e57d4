"""One hostile record on prices.raw or prices: a defined outcome, never an exception out of a loop.

The relay's hot path (``parse_raw_record``), its standby tail (``seq_of`` and the control fold)
and the subscriber read records anyone with write access can forge. Each case here raised
``ValueError`` or ``UnicodeDecodeError`` before, which killed the reading thread; the offset was
never committed, so every successor died on the same record.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import Message

from pricing_ha.config import AppConfig
from pricing_ha.dedupe import records
from pricing_ha.dedupe.control import RELEASE, TAKEOVER, seq_of
from pricing_ha.dedupe.records import parse_raw_record
from pricing_ha.kafka.headers import CONTROL_HEADER, header_dict
from pricing_ha.publishing.pricing import InvalidPriceError, Price, encode_price
from tests.unit.dedupe.standby_log import TOKEN, Log, read_to_end, tail_of
from tests.unit.subscribing.test_subscriber import started

VALUE = encode_price(
    Price(instrument="EURUSD", seq=7, bid=1.0, ask=1.1, mid=1.05, source_time_ns=5)
)
HOSTILE_HEADERS: list[list[tuple[str, Any]]] = [
    [("publish_ns", "²".encode())],  # isdigit() says yes, int() says no
    [("publish_ns", "٣".encode())],  # an Arabic-Indic digit: int() accepts it, we must not
    [("publish_ns", b"1" * 5000)],  # beyond int()'s 4300-digit limit
    [("group", b"\xff\xfe")],  # not UTF-8
    [("member", b"\xc3")],  # a truncated UTF-8 sequence
]


def raw(headers: list[tuple[str, Any]], *, key: bytes = b"EURUSD", value: bytes = VALUE) -> Message:
    """A raw price with ``headers``."""
    return Message(topic="prices.raw", partition=0, offset=3, key=key, value=value, headers=headers)


@pytest.mark.parametrize("headers", HOSTILE_HEADERS)
def test_a_raw_price_with_malformed_headers_is_invalid_not_a_crash(
    headers: list[tuple[str, Any]],
) -> None:
    """Non-UTF-8 identity headers or a publish_ns int() refuses make an InvalidPriceError."""
    msg = raw(headers)
    with pytest.raises(InvalidPriceError) as info:
        parse_raw_record(msg, msg.headers())
    assert len(info.value.reason.encode()) < 200


def test_well_formed_headers_are_read() -> None:
    """Group, member and publish_ns of a well-formed raw price are what the relay uses."""
    msg = raw([("group", b"p1"), ("member", b"m"), ("publish_ns", b"123"), ("x", b"\xff")])
    assert parse_raw_record(msg, msg.headers())[:5] == ("EURUSD", 7, "p1/m", 5, 123)


def test_identity_headers_that_vary_per_record_keep_the_source_cache_bounded() -> None:
    """A publisher writing a new group and member on every record neither grows the relay's
    cache of sources past its bound nor gets a wrong source; a non-UTF-8 one is never cached."""
    for i in range(3 * records._MAX_SOURCES):
        msg = raw([("group", b"g%d" % i), ("member", b"m%d" % i)])
        assert parse_raw_record(msg, msg.headers()).source == f"g{i}/m{i}"
        assert len(records._SOURCES) <= records._MAX_SOURCES
    bad = raw([("group", b"\xff"), ("member", b"m")])
    for _ in range(2):  # refused the second time too: nothing was remembered
        with pytest.raises(InvalidPriceError, match="'group' is not UTF-8"):
            parse_raw_record(bad, bad.headers())
    assert (b"\xff", b"m") not in records._SOURCES


def test_header_dict_is_total() -> None:
    """header_dict replaces bytes that are not UTF-8 instead of raising."""
    assert header_dict([("a", b"\xff"), ("b", None), ("c", "x")]) == {
        "a": "\ufffd",
        "b": "",
        "c": "x",
    }


@pytest.mark.parametrize(
    "seq_header", ["²".encode(), b"\xff", b"9" * 5000, b"99999999999999999999"]
)
def test_the_standby_reads_the_seq_of_a_price_with_a_bad_seq_header_from_its_value(
    seq_header: bytes,
) -> None:
    """A bad seq header on prices neither raises nor counts: the value's seq is used."""
    msg = Message(
        topic="prices",
        partition=0,
        offset=0,
        key=b"EURUSD",
        value=VALUE,
        headers=[("seq", seq_header)],
    )
    assert seq_of(msg) == ("EURUSD", 7)


def test_the_standby_tail_survives_hostile_records_on_prices() -> None:
    """Bad values, keys, seq and term headers on prices are folded or skipped; the tail goes on."""
    log = Log(1)
    log.append(0, key=b"\xff\xfe", value=b"\x00not json", headers=[("seq", "²".encode())])
    log.append(0, key=b"EURUSD", value=VALUE, headers=[("seq", b"\xff")])
    log.control(0, b"handover", "r2/x:1", None, ("term", b"7" * 5000))  # a kind no longer written
    log.control(0, RELEASE, "r2/x:2", None, ("term", b"8" * 5000))
    log.control(0, RELEASE, "r2/x:3", None, ("before", b"unclean"), ("below", b"-" + b"1" * 5000))
    mark = log.control(0, TAKEOVER, f"{TOKEN}:1")
    tail = tail_of(log)
    read_to_end(tail, log)
    assert tail.error is None
    snap = tail.snapshot_at(0, mark, 0)
    assert snap is not None
    assert snap.high == {"EURUSD": 7}


def test_a_keyed_record_with_a_control_header_is_folded_as_a_price() -> None:
    """The control rule needs no key: a keyed record forging a takeover header moves the
    instrument's mark and ends no term."""
    log = Log(1)
    mark = log.control(0, TAKEOVER, f"{TOKEN}:1")
    log.append(
        0,
        key=b"EURUSD",
        value=VALUE,
        headers=[(CONTROL_HEADER, TAKEOVER), ("marker", b"r9/evil:1")],
    )
    tail = tail_of(log)
    read_to_end(tail, log)
    assert tail.views[0].high == {"EURUSD": 7}
    assert tail.views[0].term == mark


@pytest.mark.parametrize(
    "value",
    [
        b"[]",
        b'{"instrument": "EURUSD"}',
        b'{"instrument": 7, "seq": 7}',
        b'{"instrument": "EURUSD", "seq": true}',
        b'{"instrument": "EURUSD", "seq": 7.0}',
        b'{"instrument": "EURUSD", "seq": 0}',
        b'{"instrument": "EURUSD", "seq": 7, "epoch": null}',
        b'{"instrument": "EURUSD", "seq": 7, "epoch": -1}',
        b'{"instrument": "EURUSD", "seq": 99999999999999999999}',
    ],
)
def test_the_standby_finds_no_seq_in_a_value_that_lacks_a_valid_one(value: bytes) -> None:
    """A missing, mistyped or out-of-range instrument, seq or epoch: no position at all."""
    msg = Message(topic="prices", partition=0, offset=0, key=b"EURUSD", value=value)
    assert seq_of(msg) is None


async def test_the_subscriber_delivers_a_price_with_bad_headers_and_counts_them() -> None:
    """A publish_ns int() refuses is left out of the delivery (counted); the price still goes."""
    sub, fake = await started()
    good = raw([("group", b"p1"), ("member", b"a"), ("publish_ns", b"10")])
    bad_ns = raw([("publish_ns", "²".encode()), ("group", b"\xff")], value=VALUE)
    fake.batches = [[bad_ns, good]]
    got = await sub.poll(0.1)
    assert [(d.instrument, d.seq, d.publish_ns) for d in got] == [("EURUSD", 7, None)]
    assert got[0].source == "\ufffd/?"
    assert (sub.stats.bad_headers, sub.stats.invalid) == (1, 0)
    await sub.close()


async def test_the_subscriber_rate_limits_its_warnings(caplog: pytest.LogCaptureFixture) -> None:
    """A flood of undecodable prices is counted in full but logged at most once per interval."""
    sub, fake = await started()
    fake.batches = [[raw([], value=b"{" + bytes([i])) for i in range(50)]]
    with caplog.at_level(logging.WARNING, logger="pricing_ha.subscriber"):
        assert await sub.poll(0.1) == []
    assert sub.stats.invalid == 50
    assert len(caplog.records) == 1
    await sub.close()


def test_config_default_topics_have_dead_letter_topics() -> None:
    """Both roles that dead-letter have a dead-letter topic by default."""
    topics = AppConfig().topics
    assert (topics.dlq, topics.raw_dlq) == ("md.quotes.dlq", "prices.raw.dlq")
