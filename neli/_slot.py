"""What one member knows about one partition it holds: the state the tracker
(:mod:`neli._tracker`) keeps per slot, and the rules (:mod:`neli._isolation`) read."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class State(enum.Enum):
    """Where the member stands on the partition."""

    FOLLOWER = "follower"
    LEADER = "leader"
    FENCED = "fenced"


@dataclass(slots=True)
class Slot:
    """What this member knows about one assigned partition."""

    assigned_mono: float
    incarnation: int
    #: See neli._tracker's docstring: receive mono, publish wall or sent mono.
    fresh: float | None = None
    state: State = State.FOLLOWER
    term_started_wall: float | None = None
    released: str | None = None  # non-exclusive: revoked, leading until it goes stale
    hold: bool = False  # non-exclusive, keep_leading_when_isolated: released by a session loss
    hand_over_after: float | None = None  # hold ended by a new assignment at this mono time
    since_wall: float | None = None  # wall time of the assignment (fast: sent as ``since``)
    superseded: str | None = None  # fast, exclusive: the member whose later term was seen
    superseded_mono: float | None = None  # ... and when that heartbeat was read
    prior_wall: float | None = None  # fast: send time of the latest other member's heartbeat
    prior_named: bool = False  # ... read before our own returned, and whether it named us


def previous_holder_silence(slot: Slot, now_wall: float) -> float | None:
    """Seconds since the previous holder's last heartbeat, by the evidence (see
    :mod:`neli._tracker`), or ``None`` without it."""
    if slot.fresh is None or not slot.prior_named or slot.prior_wall is None:
        return None
    return now_wall - slot.prior_wall
