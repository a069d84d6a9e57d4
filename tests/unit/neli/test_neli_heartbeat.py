"""Heartbeat records: encoding, decoding and what is refused."""

from __future__ import annotations

import dataclasses
import json

import pytest

from neli.wire import Heartbeat, HeartbeatDecodeError

HB = Heartbeat(
    group="p1",
    member_id="host-1/abcdef012345",
    member_name="host-1",
    incarnation=7,
    counter=42,
    sent_mono=1234.5,
    sent_wall=1_700_000_000.25,
    led=(0, 3, 5),
    meta={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
)


def _doc(**changes: object) -> bytes:
    """HB's encoding with fields changed (a value of None removes the field)."""
    doc = json.loads(HB.encode())
    for key, value in changes.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return json.dumps(doc).encode()


def test_round_trip_keeps_every_field() -> None:
    """decode(encode(hb)) == hb, including led and meta."""
    assert Heartbeat.decode(HB.encode()) == HB


def test_round_trip_keeps_a_terms_start() -> None:
    """A fast-variant heartbeat's ``since`` survives the round trip; it is absent otherwise."""
    hb = dataclasses.replace(HB, since=1_699_999_990.5)
    assert Heartbeat.decode(hb.encode()) == hb
    assert json.loads(hb.encode())["s"] == 1_699_999_990.5
    assert "s" not in json.loads(HB.encode())
    assert Heartbeat.decode(HB.encode()).since is None


def test_round_trip_without_led_and_meta() -> None:
    """A heartbeat with no led partitions and no meta round-trips to empty led and meta."""
    hb = Heartbeat(
        group="g",
        member_id="m/1",
        member_name="m",
        incarnation=0,
        counter=1,
        sent_mono=0.5,
        sent_wall=1.5,
    )
    decoded = Heartbeat.decode(hb.encode())
    assert decoded == hb
    assert decoded.led == ()
    assert decoded.meta == {}


def test_encoding_is_compact_versioned_json() -> None:
    """The value is compact JSON carrying version 1 and omitting meta when empty."""
    data = HB.encode()
    assert b" " not in data
    doc = json.loads(data)
    assert doc["v"] == 1
    assert doc["l"] == [0, 3, 5]
    no_meta = dataclasses.replace(HB, meta={})
    assert "x" not in json.loads(no_meta.encode())


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(None, id="none"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\xff\xfe\x00garbage", id="binary-garbage"),
        pytest.param(b"not json", id="text-garbage"),
        pytest.param(b"[1, 2, 3]", id="json-list"),
        pytest.param(b"null", id="json-null"),
        pytest.param(b"42", id="json-number"),
        pytest.param(_doc(v=2), id="wrong-version"),
        pytest.param(_doc(v=None), id="no-version"),
        pytest.param(_doc(m=None), id="missing-member-id"),
        pytest.param(_doc(g=None), id="missing-group"),
        pytest.param(_doc(sm=None), id="missing-sent-mono"),
        pytest.param(_doc(sw=None), id="missing-sent-wall"),
        pytest.param(_doc(i="seven"), id="bad-incarnation"),
        pytest.param(_doc(l=5), id="led-not-a-list"),
        pytest.param(_doc(l=["x"]), id="led-not-ints"),
        pytest.param(_doc(x="meta"), id="meta-not-a-mapping"),
    ],
)
def test_decode_refuses_what_is_not_a_heartbeat(data: bytes | None) -> None:
    """Anything but a well-formed version-1 heartbeat raises HeartbeatDecodeError."""
    with pytest.raises(HeartbeatDecodeError):
        Heartbeat.decode(data)


def test_decode_error_names_the_version() -> None:
    """A heartbeat of an unknown version is refused with that version in the message."""
    with pytest.raises(HeartbeatDecodeError, match="unknown heartbeat version 2"):
        Heartbeat.decode(_doc(v=2))


def test_decode_error_is_a_value_error_chained_to_its_cause() -> None:
    """HeartbeatDecodeError is a ValueError and keeps the underlying error as its cause."""
    with pytest.raises(HeartbeatDecodeError) as info:
        Heartbeat.decode(_doc(m=None))
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value.__cause__, KeyError)


# -- hostile records (issue 45): refused with a reason, never another exception ---------------

#: Quotes, escapes and brackets inside a string are not nesting.
ODD_NAME = 'a"[[[[{{\\"]'


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(HB.encode().replace(b'"i":7', b'"i":1e400'), "bad field i", id="i-1e400"),
        pytest.param(HB.encode().replace(b"[0,3,5]", b"[1e400]"), "bad field l", id="led-1e400"),
        pytest.param(
            HB.encode().replace(b'"sm":1234.5', b'"sm":-1e400'),
            "bad field sm",
            id="sent-mono-minus-1e400",
        ),
        pytest.param(_doc(i=float("inf")), "not json", id="incarnation-Infinity"),
        pytest.param(_doc(sw=float("nan")), "not json", id="sent-wall-NaN"),
        pytest.param(_doc(i=True), "bad field i", id="incarnation-bool"),
        pytest.param(_doc(i=7.0), "bad field i", id="incarnation-float"),
        pytest.param(_doc(c=-1), "bad field c", id="counter-negative"),
        pytest.param(_doc(c=2**70), "bad field c", id="counter-absurd"),
        pytest.param(_doc(l=[-1]), "bad field l", id="led-negative"),
        pytest.param(_doc(l=[2**31]), "bad field l", id="led-beyond-int32"),
        pytest.param(_doc(g=7), "bad field g", id="group-not-a-string"),
        pytest.param(_doc(sw=-5.0), "bad field sw", id="sent-wall-negative"),
        pytest.param(_doc(x={"k": {"nested": 1}}), "bad field x", id="meta-nested"),
        pytest.param(_doc(x={"k": [1]}), "bad field x", id="meta-list"),
        pytest.param(
            b'{"v":1,"y":' + b"[" * 500 + b"]" * 500 + b"}",
            "missing field g",
            id="nesting-in-an-unknown-field-is-harmless",
        ),
        pytest.param(_doc(x={"k": 2**64}), "bad field x", id="meta-huge-int"),
        pytest.param(_doc(n=ODD_NAME), None, id="brackets-in-strings-are-fine"),
        pytest.param(_doc(s="soon"), "bad field s", id="since-not-a-number"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "too deep", id="deep-list"),
        pytest.param(
            b'{"v":1,"x":' + b'{"a":' * 10_000 + b"1" + b"}" * 10_001, "too deep", id="deep-meta"
        ),
        pytest.param(_doc(n="n" * 300_000), "too large", id="too-large"),
        pytest.param(_doc(l=list(range(5000))), "bad field l", id="led-too-long"),
    ],
)
def test_decode_refuses_hostile_records_with_a_reason(data: bytes, reason: str | None) -> None:
    """Non-finite, mistyped, absurd, deeply nested or oversized records are refused with a
    bounded reason (issue 45: ``"i": 1e400`` raised OverflowError and killed the poller)."""
    if reason is None:
        assert Heartbeat.decode(data).member_name == ODD_NAME
        return
    with pytest.raises(HeartbeatDecodeError) as info:
        Heartbeat.decode(data)
    assert info.value.reason == reason
    assert len(str(info.value)) <= 300


def test_decode_refuses_timestamps_beyond_the_receivers_bound() -> None:
    """A send time or term start later than ``not_after_wall`` is refused; at the bound it is
    accepted (issue 45: a future ``s`` marked a relay's owner as superseded)."""
    bound = HB.sent_wall + 1.0
    assert Heartbeat.decode(_doc(sw=bound), not_after_wall=bound).sent_wall == bound
    with pytest.raises(HeartbeatDecodeError, match="future") as info:
        Heartbeat.decode(_doc(sw=bound + 0.5), not_after_wall=bound)
    assert info.value.reason == "future sw"
    with pytest.raises(HeartbeatDecodeError) as info:
        Heartbeat.decode(_doc(s=bound + 0.5), not_after_wall=bound)
    assert info.value.reason == "future s"


def test_decode_refuses_led_partitions_the_topic_does_not_have() -> None:
    """With the partition count known, a led partition outside it is refused."""
    assert Heartbeat.decode(HB.encode(), partitions=6).led == (0, 3, 5)
    with pytest.raises(HeartbeatDecodeError) as info:
        Heartbeat.decode(HB.encode(), partitions=5)
    assert info.value.reason == "bad field l"
