"""Hostile records of the NELI topic, for :mod:`tests.integration.hostile.hostile`.

Heartbeats are small JSON objects (``neli._heartbeat``: ``v g m n i c sm sw l x s``), produced
without a key to an explicit partition. The hostile ones name real groups (so every member's
tracker reads them) and a member id starting ``forged-`` (so the judge can tell its genuine
members' heartbeats from them):

* ``neli.invalid_json``: not JSON, not an object, missing or wrongly typed fields;
* ``neli.huge_numbers``: ``"i": 1e400`` (Python's ``json`` reads infinity, ``int()`` of it
  raises ``OverflowError``), ``1e400`` in ``l`` or ``c``, a 400-digit incarnation;
* ``neli.deep_nesting``: 1,500 nested arrays (``RecursionError`` in Python's ``json``);
* ``neli.future_timestamps``: send times and term start ten years ahead;
* ``neli.forged_relay_heartbeat``: a well-formed heartbeat of the relay's group whose term
  began (``s``) an hour from now: to an exclusive owner it says "your partition was taken".
"""

from __future__ import annotations

import time

import orjson

NEST_DEPTH = 1500  # deeper than CPython's recursion limit (1,000) and orjson's (1,024)


def nested(depth: int = NEST_DEPTH) -> bytes:
    """``depth`` nested JSON arrays."""
    return b"[" * depth + b"]" * depth


def _heartbeat(n: int, group: str, partitions: int, tag: str, **over: object) -> dict[str, object]:
    now = time.time()
    hb: dict[str, object] = {
        "v": 1,
        "g": group,
        "m": f"forged-{tag}-{n}",
        "n": "forged",
        "i": 1,
        "c": n,
        "sm": time.monotonic(),
        "sw": now,
        "l": [n % partitions],
        "s": now,
    }
    hb.update(over)
    return hb


def neli_value(
    kind: str, n: int, partitions: int, groups: dict[str, str], tag: str
) -> tuple[int, bytes]:
    """The partition and value of the ``n``-th hostile NELI record of class ``kind``.

    Args:
        kind: a ``neli.*`` class.
        n: a serial number (varies the shape and the partition).
        partitions: M.
        groups: NELI group ids by label (``p1``, ``p2``, ``relay``).
        tag: the run's tag, part of every forged member id.
    """
    labels = sorted(groups)
    group = groups[labels[n % len(labels)]]
    if kind == "neli.invalid_json":
        bad = [b"{not json", b"\xff\xfe", b"[]", b"null", b'{"v":1}', b'{"v":1,"g":"x","m":[]}']
        value = bad[n % len(bad)]
    elif kind == "neli.huge_numbers":
        field, number = [
            ("i", b"1e400"),
            ("l", b"[1e400]"),
            ("c", b"-1e400"),
            ("i", b"%d" % 10**400),
        ][n % 4]
        hb = _heartbeat(n, group, partitions, tag, **{field: "HUGE"})
        value = orjson.dumps(hb).replace(b'"HUGE"', number)
    elif kind == "neli.deep_nesting":
        value = b'{"v":1,"g":"%s","x":%s}' % (group.encode(), nested())
    elif kind == "neli.future_timestamps":
        far = time.time() + 10 * 365 * 86400
        value = orjson.dumps(_heartbeat(n, group, partitions, tag, sw=far, s=far, sm=far))
    elif kind == "neli.forged_relay_heartbeat":
        hb = _heartbeat(n, groups["relay"], partitions, tag, s=time.time() + 3600)
        value = orjson.dumps(hb)
    else:
        raise ValueError(f"not a NELI class: {kind}")
    return n % partitions, value
