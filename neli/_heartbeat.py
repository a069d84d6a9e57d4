"""The heartbeat record published on the NELI topic.

A heartbeat says who sent it (group, member id, incarnation, counter) and when by the sender's
clocks. Its value is small JSON; it has no key (it is produced to an explicit partition).

The fast variant only trusts *its own* heartbeats, recognised by member id **and** incarnation
(a new incarnation starts with every assignment, so an echo from an earlier term never counts),
and measures freshness by the monotonic time at which it sent the heartbeat that came back, so
a record that sat in a fetch buffer while the process was frozen is seen as old, not as new.

``led`` lists the partitions the sender leads (for status displays) and ``meta`` carries opaque
application data as a flat mapping of strings to JSON scalars, such as a trace context for the
telemetry of fail-overs.

Decoding refuses anything else, whoever wrote it, with :class:`HeartbeatDecodeError` and never
another exception: the caps and checks are in :mod:`neli._heartbeat_check`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neli import _heartbeat_check as check
from neli._heartbeat_check import MAX_HEARTBEAT_BYTES, HeartbeatDecodeError

__all__ = ["Heartbeat", "HeartbeatDecodeError"]


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
    def decode(
        cls,
        data: bytes | None,
        *,
        not_after_wall: float | None = None,
        partitions: int | None = None,
    ) -> Heartbeat:
        """Parse and check a heartbeat record.

        Args:
            data: the record's value.
            not_after_wall: refuse a send time (``sent_wall``) or term start (``since``) later
                than this: the receiver's wall clock plus its bound on how far ahead a sender's
                clock may be (``NeliConfig.max_future_ms``). ``None``: no bound.
            partitions: M, if known: refuse led partitions outside ``[0, M)``.

        Raises:
            HeartbeatDecodeError: if ``data`` is not a version-1 heartbeat within the caps of
                :mod:`neli._heartbeat_check` (its ``reason`` says which check failed). No other
                exception escapes, whatever ``data`` holds.
        """
        if not data:
            raise HeartbeatDecodeError("empty")
        if len(data) > MAX_HEARTBEAT_BYTES:
            raise HeartbeatDecodeError("too large", f"{len(data)} > {MAX_HEARTBEAT_BYTES} bytes")
        try:
            doc = json.loads(data, parse_constant=check.refuse_constant)
        except HeartbeatDecodeError:
            raise
        except RecursionError as exc:  # raised cleanly by the C scanner, the stack unwound
            raise HeartbeatDecodeError("too deep", "JSON nested too deeply") from exc
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise HeartbeatDecodeError("not json", str(exc)) from exc
        if not isinstance(doc, dict):
            raise HeartbeatDecodeError("not an object", type(doc).__name__)
        if doc.get("v") != 1:
            raise HeartbeatDecodeError("version", f"unknown heartbeat version {doc.get('v')!r}")
        try:
            return cls(
                group=check.text(doc, "g"),
                member_id=check.text(doc, "m"),
                member_name=check.text(doc, "n"),
                incarnation=check.integer(doc, "i"),
                counter=check.integer(doc, "c"),
                sent_mono=check.seconds(doc, "sm"),
                sent_wall=check.seconds(doc, "sw", not_after_wall),
                led=check.led(doc, partitions),
                meta=check.meta(doc),
                since=None if doc.get("s") is None else check.seconds(doc, "s", not_after_wall),
            )
        except KeyError as exc:
            raise HeartbeatDecodeError(f"missing field {exc.args[0]}") from exc
