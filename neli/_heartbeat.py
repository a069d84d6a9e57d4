"""The heartbeat record published on the NELI topic.

A heartbeat says who sent it (group, member id, incarnation, counter) and when by the sender's
clocks. Its value is small JSON; it has no key (it is produced to an explicit partition).

The fast variant only trusts *its own* heartbeats, recognised by member id **and** incarnation
(a new incarnation starts with every assignment, so an echo from an earlier term never counts),
and measures freshness by the monotonic time at which it sent the heartbeat that came back, so
a record that sat in a fetch buffer while the process was frozen is seen as old, not as new.

``led`` lists the partitions the sender leads (for status displays) and ``meta`` carries opaque
application data, such as a trace context for the telemetry of fail-overs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class HeartbeatDecodeError(ValueError):
    """A record on the NELI topic is not a heartbeat."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """One heartbeat.

    Attributes:
        group: the sender's consumer group.
        member_id: unique per process start.
        member_name: human-readable sender name.
        incarnation: the sender's term counter for this partition (fast variant), else 0.
        counter: per-sender sequence number.
        sent_mono: the sender's monotonic clock at send time (seconds; meaningful only to
            the sender itself).
        sent_wall: the sender's wall clock at send time (seconds since the epoch).
        led: partitions the sender leads at send time.
        meta: opaque application data.
        since: fast variant: the sender's wall clock when it was assigned the partition this
            heartbeat is written to (its term there began then), else ``None``. A member that
            reads a heartbeat of another member whose term on its own partition began later
            knows the partition was taken from it (see :mod:`neli._tracker`).
    """

    group: str
    member_id: str
    member_name: str
    incarnation: int
    counter: int
    sent_mono: float
    sent_wall: float
    led: tuple[int, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    since: float | None = None

    def encode(self) -> bytes:
        """Serialise to compact JSON bytes."""
        doc: dict[str, Any] = {
            "v": 1,
            "g": self.group,
            "m": self.member_id,
            "n": self.member_name,
            "i": self.incarnation,
            "c": self.counter,
            "sm": self.sent_mono,
            "sw": self.sent_wall,
            "l": list(self.led),
        }
        if self.meta:
            doc["x"] = dict(self.meta)
        if self.since is not None:
            doc["s"] = self.since
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | None) -> Heartbeat:
        """Parse a heartbeat.

        Raises:
            HeartbeatDecodeError: if ``data`` is not a version-1 heartbeat.
        """
        if not data:
            raise HeartbeatDecodeError("empty record")
        try:
            doc = json.loads(data)
            if doc.get("v") != 1:
                raise HeartbeatDecodeError(f"unknown heartbeat version {doc.get('v')!r}")
            return cls(
                group=str(doc["g"]),
                member_id=str(doc["m"]),
                member_name=str(doc["n"]),
                incarnation=int(doc["i"]),
                counter=int(doc["c"]),
                sent_mono=float(doc["sm"]),
                sent_wall=float(doc["sw"]),
                led=tuple(int(p) for p in doc.get("l", ())),
                meta=dict(doc.get("x", {})),
                since=None if doc.get("s") is None else float(doc["s"]),
            )
        except HeartbeatDecodeError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise HeartbeatDecodeError(f"not a heartbeat: {exc}") from exc
