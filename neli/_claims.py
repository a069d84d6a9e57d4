"""What the other members of the group claim to lead, as read from their heartbeats.

Every heartbeat names all the partitions its sender leads at the moment it is sent, and every
member reads heartbeats on the partitions it is assigned. So a member learns the leaders of
partitions it does not own too: the latest heartbeat that named a partition is its
*predecessor* there (``LeadershipEvent.predecessor``), and an unbroken run of claims by one
member is a *rival* claim, which tells a member riding through isolation when another member
has taken the partition over (see :mod:`neli._tracker`).

Pure like :mod:`neli._tracker`, which keeps one: no I/O, receipt times passed in by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from neli._heartbeat import Heartbeat


@dataclass(frozen=True, slots=True)
class Rival:
    """Another member of the group, seen claiming a partition in its heartbeats."""

    member_id: str
    first_mono: float  # receipt of the first heartbeat of its current unbroken run of claims
    last_mono: float  # receipt of its latest heartbeat claiming the partition
    counter: int  # that heartbeat's counter: a later one without the partition ends the claim


class Claims:
    """Per partition, the latest claim and the current rival claim (not thread-safe).

    Args:
        threshold_s: T; a run of claims with a gap of T or more between receipts is broken.
    """

    def __init__(self, threshold_s: float) -> None:
        """Create an empty record."""
        self._t = threshold_s
        self._leaders: dict[int, Heartbeat] = {}
        #: Per partition: another member of the group seen leading it.
        self._rivals: dict[int, Rival] = {}

    def latest(self, partition: int) -> Heartbeat | None:
        """The latest heartbeat seen from another member that listed ``partition`` as led."""
        return self._leaders.get(partition)

    def rival(self, partition: int) -> Rival | None:
        """The member whose claim on ``partition`` stands, with its run of claims, if any."""
        return self._rivals.get(partition)

    def observe(self, hb: Heartbeat, now_mono: float) -> None:
        """A heartbeat of another member of the group, received at ``now_mono``.

        The caller filters: heartbeats of this member, and of other groups (which share the
        topic; their leaders are not our predecessors), are not claims.
        """
        for led in hb.led:
            self._leaders[led] = hb
            rival = self._rivals.get(led)
            if rival is None or rival.member_id != hb.member_id:
                self._rivals[led] = Rival(hb.member_id, now_mono, now_mono, hb.counter)
            elif hb.counter > rival.counter:
                run_broken = now_mono - rival.last_mono >= self._t
                first = now_mono if run_broken else rival.first_mono
                self._rivals[led] = Rival(hb.member_id, first, now_mono, hb.counter)
        # A later heartbeat that no longer names a partition ends its sender's claim on it:
        # a claim that merely has not aged out yet must not count as "leading it for over
        # T" (after a hand-over, it made both members of a group give the partition up in
        # the next coordinator stall). Copies of older heartbeats (full NELI sends one per
        # partition, read in any order) are told apart by the sender's counter.
        for p in [
            p
            for p, rival in self._rivals.items()
            if rival.member_id == hb.member_id and p not in hb.led and hb.counter > rival.counter
        ]:
            del self._rivals[p]
