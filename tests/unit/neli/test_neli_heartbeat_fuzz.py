"""Fuzzing the heartbeat decoder: whatever a record holds, decoding returns a heartbeat that keeps
its invariants or raises HeartbeatDecodeError, never another exception (issue 45)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from neli._heartbeat_check import MAX_LED, MAX_META, MAX_STRING
from neli.wire import Heartbeat, HeartbeatDecodeError
from tests import strategies

WALL = 1_700_000_000.0
KEYS = ["v", "g", "m", "n", "i", "c", "sm", "sw", "l", "x", "s"]

json_values = strategies.json_values(int_bits=80, max_size=4, max_leaves=20)
#: The receiver's bound and partition count, or none.
bounds = st.tuples(st.none() | st.floats(0, 2 * WALL), st.none() | st.integers(1, 64))

heartbeats = st.builds(
    Heartbeat,
    group=st.text(max_size=30),
    member_id=st.text(max_size=30),
    member_name=st.text(max_size=30),
    incarnation=st.integers(0, 2**63 - 1),
    counter=st.integers(0, 2**63 - 1),
    sent_mono=st.floats(0, 1e9),
    sent_wall=st.floats(0, WALL),
    led=st.lists(st.integers(0, 63), max_size=64).map(tuple),
    meta=st.dictionaries(
        st.text(max_size=20), st.text(max_size=60) | st.integers(0, 9), max_size=5
    ),
    since=st.none() | st.floats(0, WALL),
)


def decode_or_refuse(data: bytes, not_after: float | None, partitions: int | None) -> None:
    """Decode ``data``; a result must keep every invariant, a refusal must be our error."""
    try:
        hb = Heartbeat.decode(data, not_after_wall=not_after, partitions=partitions)
    except HeartbeatDecodeError as exc:
        refused = exc
    else:
        check_invariants(hb, not_after, partitions)
        return
    assert 0 < len(refused.reason) <= 40
    assert len(str(refused)) <= 300


def check_invariants(hb: Heartbeat, not_after: float | None, partitions: int | None) -> None:
    """What every accepted heartbeat satisfies."""
    for name in (hb.group, hb.member_id, hb.member_name):
        assert isinstance(name, str)
        assert len(name) <= MAX_STRING
    for number in (hb.incarnation, hb.counter):
        assert type(number) is int
        assert 0 <= number < 2**63
    times = [hb.sent_mono, hb.sent_wall] + ([] if hb.since is None else [hb.since])
    assert all(type(t) is float and math.isfinite(t) and t >= 0 for t in times)
    if not_after is not None:
        assert hb.sent_wall <= not_after
        assert hb.since is None or hb.since <= not_after
    assert len(hb.led) <= MAX_LED
    assert all(type(p) is int and 0 <= p < (partitions or 2**31) for p in hb.led)
    assert len(hb.meta) <= MAX_META
    for key, value in hb.meta.items():
        assert isinstance(key, str)
        assert len(key) <= MAX_STRING
        assert value is None or isinstance(value, bool | int | str) or math.isfinite(value)
    json.dumps(dict(hb.meta), allow_nan=False)  # re-encodable: no depth, no NaN
    str(hb)


@given(st.binary(max_size=2000), bounds)
def test_arbitrary_bytes_decode_or_are_refused(data: bytes, bound: tuple[Any, Any]) -> None:
    """Random bytes: a valid heartbeat or a refusal."""
    decode_or_refuse(data, *bound)


@given(json_values, bounds)
def test_arbitrary_json_decodes_or_is_refused(value: Any, bound: tuple[Any, Any]) -> None:
    """Any JSON document (NaN and Infinity included): a valid heartbeat or a refusal."""
    decode_or_refuse(json.dumps(value).encode(), *bound)


@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=len(KEYS)), bounds)
def test_objects_with_heartbeat_keys_decode_or_are_refused(
    doc: dict[str, Any], bound: tuple[Any, Any]
) -> None:
    """Objects made of the heartbeat's own keys holding any values: valid or refused."""
    doc.setdefault("v", 1)
    decode_or_refuse(json.dumps(doc).encode(), *bound)


@given(heartbeats, st.sampled_from(KEYS), json_values | st.just(KeyError), bounds)
def test_a_valid_heartbeat_with_one_field_changed_decodes_or_is_refused(
    hb: Heartbeat, key: str, value: Any, bound: tuple[Any, Any]
) -> None:
    """One field of a valid heartbeat replaced by any JSON value, or removed."""
    doc = json.loads(hb.encode())
    if value is KeyError:
        doc.pop(key, None)
    else:
        doc[key] = value
    decode_or_refuse(json.dumps(doc).encode(), *bound)


@given(heartbeats, st.data(), bounds)
def test_a_valid_heartbeat_with_bytes_mutated_decodes_or_is_refused(
    hb: Heartbeat, data: st.DataObject, bound: tuple[Any, Any]
) -> None:
    """A valid heartbeat's bytes truncated, overwritten or spliced: valid or refused."""
    raw = bytearray(hb.encode())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw)))
        op = data.draw(st.sampled_from(["cut", "set", "insert"]))
        if op == "cut":
            del raw[at : at + data.draw(st.integers(1, 8))]
        elif op == "set" and at < len(raw):
            raw[at] = data.draw(st.integers(0, 255))
        else:
            raw[at:at] = data.draw(st.sampled_from([b"[", b"{", b'"', b"\\", b"1e400", b"NaN"]))
    decode_or_refuse(bytes(raw), *bound)


@given(heartbeats)
def test_every_heartbeat_within_the_caps_round_trips(hb: Heartbeat) -> None:
    """What a member sends, every member accepts: decode(encode(hb)) == hb."""
    assert Heartbeat.decode(hb.encode(), not_after_wall=WALL, partitions=64) == hb
