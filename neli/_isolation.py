"""Non-exclusive NELI riding through isolation (``keep_leading_when_isolated``).

A member that was leading a partition keeps leading it, *provisionally*, when its observations
go stale while the partition is still assigned (the broker stopped answering) or when its
session is lost. Provisional leadership ends:

* when a new assignment arrives that does not include the partition: it is handed over, led
  until another member of the group is seen leading it. While nobody is, the member keeps it
  as long as heartbeats still reach it (it would see such a claim: every member's heartbeats
  name what it leads): T after the assignment or the last heartbeat it read, whichever is
  later. A cooperative rebalance leaves a partition that moves with no owner until its second
  round, and the rounds that follow a broker stall can take longer; releasing it T after the
  assignment would leave the group without a leader for it until then;
* when another member of the group has been seen leading the partition for longer than T
  *during this member's term*. Claims made before the term began are the predecessor's,
  handing the partition over: counted, they made a member give up a partition it had just
  taken over when a broker stall came before the predecessor's next heartbeat (the one that
  no longer names it) was read.

A stall of the broker or of the group coordinator therefore never leaves a partition without
a leader; the price is more overlap (duplicates downstream) while the stall lasts. A planned
revocation (a rebalance) is unaffected.

Pure like :mod:`neli._tracker`, which keeps one: no I/O, receipt times passed in by the caller.
"""

from __future__ import annotations

from neli._claims import Claims
from neli._slot import Slot, State


class Isolation:
    """The rules above for one member (not thread-safe).

    Args:
        enabled: ``keep_leading_when_isolated`` in non-exclusive mode.
        threshold_s: T.
        claims: what the other members of the group claim, kept by the tracker.
    """

    def __init__(self, enabled: bool, threshold_s: float, claims: Claims) -> None:
        """Create the rules; nothing heard yet."""
        self.enabled = enabled
        self._t = threshold_s
        self._claims = claims
        #: Receipt (mono) of the latest heartbeat read, from anyone: whether this member can
        #: still see what the others of its group claim.
        self._heard: float | None = None

    def heard(self, now_mono: float) -> None:
        """A heartbeat (anyone's) was read at ``now_mono``."""
        self._heard = now_mono

    def handed_over(self, partition: int, slot: Slot) -> str | None:
        """Why a partition handed over after a session loss is no longer led (its new owner
        was seen leading it since the hand-over began), or ``None``."""
        if slot.hand_over_after is None or slot.released is None:
            return None
        rival = self._claims.rival(partition)
        if rival is not None and rival.last_mono >= slot.hand_over_after:
            return f"handed over to {rival.member_id}"
        return None

    def why_not(self, partition: int, slot: Slot, now_mono: float, stale: str) -> str | None:
        """Past T (or held after a session loss): ``None`` to lead on provisionally, else why
        not, starting with ``stale`` (the variant's word for it)."""
        if not self.enabled or slot.state is not State.LEADER:
            return stale
        if slot.released is not None and not slot.hold:
            if (
                slot.hand_over_after is not None
                and self._heard is not None
                and now_mono - self._heard < self._t
            ):
                return None  # handed over, nobody seen leading it, heartbeats still arrive
            return stale  # a planned revocation: released as usual
        rival = self._claims.rival(partition)
        if (
            rival is not None
            and now_mono - rival.last_mono < self._t
            and rival.last_mono - max(rival.first_mono, slot.assigned_mono) >= self._t
        ):
            return f"{stale}; {rival.member_id} has led it for over T"
        return None
