"""A member's status snapshot: what :meth:`neli.Neli.status` returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neli._tracker import LeadershipTracker

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
        rejected_heartbeats: records read on the NELI topic and refused since start: not
            heartbeats, outside the caps, timestamped too far in the future, or lying in a way
            the member detects (per reason: :attr:`neli.Neli.heartbeats_rejected`). Anyone who
            may write the topic can make this grow; it never costs leadership.
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
    rejected_heartbeats: int = 0

    @classmethod
    def of(
        cls,
        tracker: LeadershipTracker,
        *,
        group: str,
        member_id: str,
        member_name: str,
        partitions: int,
        now_mono: float,
        now_wall: float,
        rejected_heartbeats: int = 0,
    ) -> NeliStatus:
        """The snapshot of ``tracker`` at the given instant (the caller holds its lock)."""
        fresh = tracker.freshness(now_mono, now_wall)
        return cls(
            group=group,
            member_id=member_id,
            member_name=member_name,
            partitions=partitions,
            assigned=tuple(sorted(tracker.assigned())),
            led=tuple(sorted(tracker.led(now_mono, now_wall))),
            age_s={p: fresh[p] for p in sorted(fresh)},
            why_not={p: r for p in sorted(fresh) if (r := tracker.why_not(p, now_mono, now_wall))},
            stalls=tracker.stalls,
            provisional=tuple(sorted(tracker.provisional(now_mono, now_wall))),
            rejected_heartbeats=rejected_heartbeats,
        )
