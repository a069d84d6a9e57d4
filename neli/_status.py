"""A member's status snapshot: what :meth:`neli.Neli.status` returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["NeliStatus"]


@dataclass(frozen=True, kw_only=True)
class NeliStatus:
    """One member's view of its group at one instant, for status displays and health checks.

    A snapshot: like :meth:`neli.Neli.leads`, it may be stale as soon as it is returned.

    Attributes:
        group: the consumer group id.
        member_id: this member's id in heartbeats (name plus incarnation).
        member_name: the configured member name.
        partitions: M, the NELI topic's partition count.
        assigned: partitions the group assigns to this member, ascending.
        led: partitions this member leads at the snapshot's instant, ascending.
        age_s: per assigned partition, seconds since its last observation (None: never seen).
        why_not: per assigned partition not led, the reason (e.g. ``"stale"``, ``"grace"``).
        stalls: how many times this process was seen to stall longer than the threshold.
        provisional: partitions in ``led`` held only provisionally (non-exclusive mode with
            ``keep_leading_when_isolated``: the broker stopped answering or the session was
            lost).
    """

    group: str
    member_id: str
    member_name: str
    partitions: int
    assigned: tuple[int, ...] = ()
    led: tuple[int, ...] = ()
    age_s: Mapping[int, float | None] = field(default_factory=dict)
    why_not: Mapping[int, str] = field(default_factory=dict)
    stalls: int = 0
    provisional: tuple[int, ...] = ()
