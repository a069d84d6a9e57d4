"""Detection by the standby: which silent partitions of ``prices`` this member takes over.

The group coordinator notices a crashed relay only after its session timeout S (6 s at least
on MSK by default), then rebalances. Every member's standby tail, though, reads every
partition of ``prices`` continuously, and every member receives the others' NELI heartbeats
(:mod:`.liveness`). So a member can see an owner stop within a short threshold **D**
(``[relay] takeover_after_ms``), long before the group does:

* partition k is **quiet** when, for longer than D, the standby tail has read no record on
  ``prices[k]`` (a price, or any control record: an owner whose partition has no input
  shows it is alive with a ``tick``) *and* no heartbeat of another member claiming k has
  been received;
* the silence only counts from when this member's own view became trustworthy: its own
  heartbeats have come back without a break (:meth:`.liveness.Liveness.fresh_since`), its
  stall guard does not hold it off (``recovering``), and the tail has read k to its end once;
  a member that was paused, cut off or is catching up sees everybody silent at once;
* of the live members (heartbeats received within D), the **successor** of k is the one
  rendezvous hashing of k and member id ranks first (:func:`successor`): every member
  computes the same answer from the same heartbeats, so one member acts.

The successor then takes k over like any takeover (:mod:`.succession`), and the broker makes
it exclusive: the partition's transactional producer's ``init_transactions`` fences whoever
held the partition's ``transactional.id`` before, whatever its clock or state. A *wrong*
suspicion (a slow owner, a pause shorter than S) therefore costs a move, never a duplicate or
a gap: the fenced owner's open transaction is aborted, and the successor re-emits from marks
read ``read_committed``. Views that differ for a moment (one member hears a heartbeat the other
has not yet) can make two members act; the later ``init_transactions`` wins, as above.

The group assignment still decides the steady state: a partition taken over on suspicion is
held like one being handed over (:mod:`.handover`), until the member the group assigns it to
asks for it (or the group gives it to this member).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

from pricing_ha.dedupe.liveness import Liveness

__all__ = ["Detector", "successor"]


def successor(partition: int, members: Sequence[str]) -> str | None:
    """The member rendezvous hashing ranks first for ``partition`` (``None``: no member).

    The same on every member for the same set; removing a member moves only its partitions.
    """
    if not members:
        return None

    def weight(member: str) -> bytes:
        return hashlib.blake2b(f"{partition}\x00{member}".encode(), digest_size=8).digest()

    return max(members, key=lambda m: (weight(m), m))


class Detector:
    """Decides, from the standby and the heartbeats, which partitions to take over now.

    Args:
        threshold_s: D, how long a partition must be quiet (see the module docstring).
        liveness: the relay group's heartbeats as received.
        last_record: partition -> monotonic time the standby tail last read a record of it.
        caught_up: whether the tail has read a partition to its end at least once.
        recovering: whether this member's stall guard holds it off (NELI's).
        started: this member's start (monotonic): nothing is quiet for longer than that.
    """

    def __init__(
        self,
        threshold_s: float,
        liveness: Liveness,
        *,
        last_record: Callable[[int], float],
        caught_up: Callable[[int], bool],
        recovering: Callable[[], bool],
        started: float,
    ) -> None:
        """Nothing suspected yet."""
        self.threshold_s = threshold_s
        self.liveness = liveness
        self._last_record = last_record
        self._caught_up = caught_up
        self._recovering = recovering
        self._started = started

    def quiet_for(self, partition: int, now: float) -> float | None:
        """How long ``partition`` has been quiet as this member can tell, or ``None`` when
        this member's view cannot tell (see the module docstring)."""
        fresh = self.liveness.fresh_since(now)
        if fresh is None or self._recovering() or not self._caught_up(partition):
            return None
        heard = max(
            self._last_record(partition),
            self.liveness.claimed_at(partition),
            fresh,  # silence counts from when the own view became good
            self._started,
        )
        return now - heard

    def take_over(self, candidates: Iterable[int], now: float) -> list[int]:
        """Of ``candidates`` (partitions this member neither works on nor was assigned), those
        quiet for longer than D whose successor this member is."""
        found: list[int] = []
        live: list[str] | None = None
        for partition in candidates:
            quiet = self.quiet_for(partition, now)
            if quiet is None or quiet <= self.threshold_s:
                continue
            if live is None:
                live = self.liveness.live(self.threshold_s, now)
            if successor(partition, live) == self.liveness.me:
                found.append(partition)
        return found
