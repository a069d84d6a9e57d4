"""What one member knows about one partition it holds: the state the tracker
(:mod:`neli._tracker`) keeps per slot, and the rules (:mod:`neli._isolation`) read, with the
fast exclusive variant's reading of other members' heartbeats on it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from neli._heartbeat import Heartbeat


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
    sent: dict[int, float] = field(default_factory=dict)  # fast: own counter -> sent mono

    def remember_sent(self, counter: int, sent_mono: float, threshold_s: float) -> None:
        """This member sends heartbeat ``counter`` here at ``sent_mono``; sends T or more
        before it are forgotten (they could not make the slot fresh any more)."""
        self.sent[counter] = sent_mono
        for old in [c for c, at in self.sent.items() if sent_mono - at >= threshold_s]:
            del self.sent[old]

    def sent_it(self, hb: Heartbeat) -> bool:
        """Whether this member sent ``hb`` here (its counter, at its send time)."""
        return self.sent.get(hb.counter) == hb.sent_mono

    def forgot(self, hb: Heartbeat) -> bool:
        """Whether ``hb`` is older than every send remembered (stale, sent or not)."""
        return bool(self.sent) and hb.counter < min(self.sent)


def previous_holder_silence(slot: Slot, now_wall: float) -> float | None:
    """Seconds since the previous holder's last heartbeat, by the evidence (see
    :mod:`neli._tracker`), or ``None`` without it."""
    if slot.fresh is None or not slot.prior_named or slot.prior_wall is None:
        return None
    return now_wall - slot.prior_wall


def observe_other(
    partition: int, slot: Slot, hb: Heartbeat, publish_wall: float | None, now_mono: float
) -> None:
    """Fast, exclusive: another member's heartbeat on a partition this member holds."""
    if hb.since is not None and slot.since_wall is not None and hb.since > slot.since_wall:
        # Its term here began after ours: the partition was taken from us (we are the
        # zombie), unless the group disproves it (see neli._tracker): our own later heartbeats
        # land after this one.
        if slot.superseded is None:
            slot.superseded, slot.superseded_mono = hb.member_id, now_mono
        return
    if slot.fresh is None:
        # Read before our own heartbeat returned: the previous holder's, the evidence for
        # ending the grace period early (see neli._tracker). Later ones land after ours and
        # end their sender's term instead.
        sent = publish_wall if publish_wall is not None else hb.sent_wall
        if slot.prior_wall is None or sent >= slot.prior_wall:
            slot.prior_wall, slot.prior_named = sent, partition in hb.led
