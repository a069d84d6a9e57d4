"""What a heartbeat record may be: the caps and field checks behind :meth:`Heartbeat.decode`.

Anyone with write access to the NELI topic can write any bytes there, and every member of every
group reads them (issue 45: one ``"i": 1e400`` killed each member's poller in turn). So decoding
is a check, and its only failure is :class:`HeartbeatDecodeError` with a short reason taken from
a fixed set (safe as a metric label). It refuses, before or while parsing:

* records larger than :data:`MAX_HEARTBEAT_BYTES` (before parsing), and JSON nested deeper than
  the interpreter's recursion limit (about 1,000 levels: :func:`json.loads` stops with a clean
  ``RecursionError`` in C, at C speed, where a scan in Python would let a flood of large
  records starve the poll thread). Anything nested below the top level's ``l`` and ``x`` is
  then refused by the field checks;
* the JSON constants ``NaN`` and ``Infinity``, and numbers that overflow to them (``1e400``);
* fields of the wrong type (``true`` is not an integer, ``7.0`` is not an incarnation);
* integers outside ``[0, 2**63 - 1]``, partitions outside ``[0, 2**31 - 1]`` (or, when the
  caller knows M, outside ``[0, M)``), negative times, strings longer than
  :data:`MAX_STRING`, more than :data:`MAX_LED` led partitions or :data:`MAX_META` meta
  entries, and meta values that are not JSON scalars;
* send times and term starts later than the receiver's bound (``not_after_wall``: its wall
  clock plus ``NeliConfig.max_future_ms``): a legitimate sender's clock is at most the skew
  bound e ahead of the receiver's.

What is left is well-formed, but may still lie: what a member does about that, and what a writer
of lying heartbeats can still do, is in ``docs/neli-trust.md`` and :mod:`neli._tracker`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: The largest record accepted (bytes). A heartbeat is a few hundred bytes; its ``led`` list
#: and trace-context meta grow with the partitions its sender leads.
MAX_HEARTBEAT_BYTES = 256 * 1024
#: Most led partitions in one heartbeat. With leadership tracing (a ~75-byte meta entry per led
#: partition) the byte cap binds first, at about 3,000 led partitions.
MAX_LED = 4096
#: Most meta entries in one heartbeat. The caps bound the cost of refusing a record to about a
#: millisecond (measured: docs/neli-trust.md).
MAX_META = 4096
#: Longest string field (group, member id, name, meta key or value), in characters.
MAX_STRING = 1024
_MAX_INT = 2**63 - 1
_MAX_PARTITION = 2**31 - 1


class HeartbeatDecodeError(ValueError):
    """A record on the NELI topic is not a heartbeat this member accepts.

    Attributes:
        reason: why, from a small fixed set (``"not json"``, ``"too deep"``, ``"bad field i"``,
            ``"future s"``, ...): safe to count by.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail[:200]}" if detail else reason)


def refuse_constant(name: str) -> Any:
    """``parse_constant`` for :func:`json.loads`: ``NaN`` and ``Infinity`` are not numbers."""
    raise HeartbeatDecodeError("not json", f"non-finite constant {name}")


def integer(doc: Mapping[str, Any], key: str, limit: int = _MAX_INT) -> int:
    """Field ``key``: an integer in ``[0, limit]`` (not a bool, not a float)."""
    value = doc[key]
    if type(value) is not int or not 0 <= value <= limit:
        raise HeartbeatDecodeError(f"bad field {key}", f"not an integer in [0, {limit}]")
    return value


def seconds(doc: Mapping[str, Any], key: str, not_after: float | None = None) -> float:
    """Field ``key``: a finite, non-negative time in seconds, not later than ``not_after``."""
    value = doc[key]
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise HeartbeatDecodeError(f"bad field {key}", "not a finite time >= 0")
    if not_after is not None and value > not_after:
        raise HeartbeatDecodeError(f"future {key}", f"{value} is after {not_after}")
    return float(value)


def text(doc: Mapping[str, Any], key: str) -> str:
    """Field ``key``: a string of at most :data:`MAX_STRING` characters."""
    value = doc[key]
    if not isinstance(value, str) or len(value) > MAX_STRING:
        raise HeartbeatDecodeError(f"bad field {key}", f"not a string of <= {MAX_STRING}")
    return value


def led(doc: Mapping[str, Any], partitions: int | None) -> tuple[int, ...]:
    """Field ``l``: at most :data:`MAX_LED` partitions, each in ``[0, M)`` when M is known."""
    value = doc.get("l", [])
    if not isinstance(value, list) or len(value) > MAX_LED:
        raise HeartbeatDecodeError("bad field l", f"not a list of <= {MAX_LED}")
    limit = _MAX_PARTITION if partitions is None else partitions - 1
    wrapper = {"l": 0}
    out = []
    for p in value:
        wrapper["l"] = p
        out.append(integer(wrapper, "l", limit))
    return tuple(out)


def meta(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Field ``x``: a flat mapping of short strings to JSON scalars (finite numbers)."""
    value = doc.get("x", {})
    if not isinstance(value, dict) or len(value) > MAX_META:
        raise HeartbeatDecodeError("bad field x", f"not an object of <= {MAX_META} entries")
    for key, item in value.items():
        scalar = item is None or isinstance(item, bool)
        scalar = scalar or (type(item) is int and abs(item) <= _MAX_INT)
        scalar = scalar or (isinstance(item, float) and math.isfinite(item))
        scalar = scalar or (isinstance(item, str) and len(item) <= MAX_STRING)
        if len(key) > MAX_STRING or not scalar:
            raise HeartbeatDecodeError("bad field x", "a key too long or a value not a scalar")
    return dict(value)
