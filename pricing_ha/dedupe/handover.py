"""The old owner's side of a move: keep emitting until the successor asks.

A planned revocation (SIGTERM, a member joining) does not stop a relay member at once. It goes
on emitting on ``prices[k]`` under the term it holds, and stops (flush, then a release marker)
once the successor asks: its probe or takeover marker appears on ``prices[k]`` after this
member's own takeover marker. So a move costs this member's flush and the release's round
trip to the successor, not a rebalance plus S + T.

An unplanned loss is handed over the same way: a lost session, or a fence (the member's own
NELI heartbeat late). The rule below does not rest on NELI's leadership, only on what the
member reads on ``prices[k]`` itself, so it holds for a member that NELI no longer trusts;
what it buys is that a stall of the broker or of the group coordinator longer than the
session timeout, which expires every relay at once, no longer silences ``prices`` until the
group has re-formed (every member rejoined, a rebalance, then the takeovers). A member that
cannot read ``prices[k]`` (paused, cut off) cannot emit under it either.

The rule it emits under: only while its standby tail has read ``prices[k]`` to its end within
:data:`HANDOVER_FRESH_S` and found no successor's request after its own term, so it stops
within that long of the successor's probe, which is what lets a successor end its grace period
on the release instead of fencing. Exclusivity does not rest on it: a successor that does not
find the partition released within 0.3 s of its probe takes it over anyway, and its
``init_transactions`` fences this member at the broker (:mod:`.succession`). A partition NELI
gives back to the member during a hand-over goes on under its old term only if nobody else
began one meanwhile.

:class:`HandOvers` moves partitions into and out of HANDING_OVER (:mod:`.lifecycle`), whose
clocks it keeps on each partition's :class:`~.lifecycle.PartitionLifecycle`;
:class:`~.relay_worker.RelayWorker` asks it whether one may be emitted on
(:meth:`HandOvers.may_emit`) and tends it (:meth:`HandOvers.tend`) from its worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping

from neli.takeover import Takeover
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.lifecycle import PartitionLifecycle, PartitionState
from pricing_ha.dedupe.standby import StandbyTail

__all__ = ["HANDOVER_FRESH_S", "HandOvers"]

log = logging.getLogger("pricing_ha.relay")

# A member handing a partition over emits only while its standby tail has read that partition
# to its end within this long (so it has seen any successor's request).
HANDOVER_FRESH_S = 1.0
_HANDOVER_MAX_S = 10.0  # a hand-over nobody asks for ends after this long (if revoked)
_TICK_EVERY_S = 0.25  # a hand-over with a stale tail writes a tick at most this often


class HandOvers:
    """The partitions this member is handing over, and the rule they are emitted under.

    Args:
        standby: this member's tail of ``prices`` (what it has read, and who asked).
        control: writes the member's ticks.
        takeover: NELI's hand-over hooks (``neli.takeover``): ends a grace period when a
            partition comes back mid hand-over.
        read_as_of: the read-back evidence: before which monotonic time everything appended
            to a partition is below a position
            (:meth:`.output_producers.OutputProducers.read_as_of`).
        lifecycles: the member's partitions (shared with the worker): their states, terms
            and hand-over clocks.
        wanted: the partitions NELI assigns the member now (shared).
        drop: ends a partition's work: flush, release, stop reading.
    """

    def __init__(
        self,
        standby: StandbyTail,
        control: ControlWriter,
        takeover: Takeover,
        *,
        read_as_of: Callable[[int, int], float],
        lifecycles: Mapping[int, PartitionLifecycle],
        wanted: Collection[int],
        drop: Callable[[int], None],
    ) -> None:
        """Nothing is being handed over yet."""
        self._standby = standby
        self._control = control
        self._read_as_of = read_as_of
        self._takeover = takeover
        self._lifecycles = lifecycles
        self._wanted = wanted
        self._drop = drop
        #: How long a revoked owner may go on emitting if no successor asks for the partition
        #: (one still assigned, only fenced, goes on: :meth:`_over`).
        self.bound_s = _HANDOVER_MAX_S

    def __contains__(self, partition: object) -> bool:
        lc = self._lifecycles.get(partition) if isinstance(partition, int) else None
        return lc is not None and lc.handing_over

    def __bool__(self) -> bool:
        return any(lc.handing_over for lc in self._lifecycles.values())

    def partitions(self) -> set[int]:
        """The partitions being handed over now."""
        return {p for p, lc in self._lifecycles.items() if lc.handing_over}

    def _in_order(self) -> list[PartitionLifecycle]:
        """The partitions being handed over, in the order their hand-overs began."""
        return sorted(
            (lc for lc in self._lifecycles.values() if lc.handing_over),
            key=lambda lc: (lc.handover_began or 0.0, lc.partition),
        )

    def begin(self, partition: int, *, bound_s: float | None = None) -> bool:
        """The partition was revoked (planned, or the session lost) or fenced: keep emitting
        until the successor asks (False: no term). ``bound_s`` replaces :attr:`bound_s` (a
        partition taken over on suspicion waits for the group longer). A partition already
        being handed over (fenced, then its session lost) goes on as it was.
        """
        lc = self._lifecycles[partition]
        if not lc.owned:
            return False
        if lc.handing_over:
            return True
        lc.move(PartitionState.HANDING_OVER)
        now = time.monotonic()
        lc.handover_began = now
        lc.handover_until = now + (self.bound_s if bound_s is None else bound_s)
        log.info("handing partition %d over (emitting until the successor asks)", partition)
        return True

    def end(self, partition: int) -> float | None:
        """Stop handing ``partition`` over; how long the hand-over lasted, if there was one."""
        lc = self._lifecycles[partition]
        until, began = lc.handover_until, lc.handover_began
        lc.handover_until = lc.handover_began = None
        lc.handover_ticked = float("-inf")
        return None if until is None or began is None else time.monotonic() - began

    def asked(self, partition: int) -> bool:
        """Whether ``partition`` is being handed over and its successor has asked for it (a
        probe or takeover marker read after this member's term): nothing more goes out on it,
        and once what went out is acknowledged it is released."""
        lc = self._lifecycles[partition]
        return (
            lc.handing_over
            and lc.term is not None
            and self._standby.requested_after(partition, lc.term)
        )

    def may_emit(self, partition: int) -> bool:
        """Whether a partition being handed over may be emitted on at this instant.

        No successor has asked for it yet (a probe or takeover marker on ``prices`` after this
        member's own takeover marker), the tail says so as of a read under
        :data:`HANDOVER_FRESH_S` old, and the bound has not passed (or the partition is still
        assigned to this member: :meth:`_over`). A partition being handed
        over follows this rule even once NELI leads it again (given back): the term this
        member emits under is the one from before the revocation, and somebody else may have
        taken one since (:meth:`tend`).
        """
        lc = self._lifecycles[partition]
        if not lc.handing_over or self._expired(lc):
            return False
        return lc.term is not None and self._standby.unrequested_within(
            partition, lc.term, HANDOVER_FRESH_S, self._read_as_of
        )

    def tend(self, grace: frozenset[int]) -> None:
        """Stop the hand-overs the successor asked for; go on with those given back.

        Args:
            grace: the partitions in their grace period now (NELI).
        """
        for lc in self._lifecycles.values():
            if lc.given_back is not None and not (lc.handing_over and lc.partition in self._wanted):
                lc.given_back = None
        for lc in self._in_order():
            partition = lc.partition
            if not lc.handing_over:
                continue  # let go by an earlier one's drop (it cannot be; as before: skipped)
            if partition in self._wanted:
                self._tend_given_back(lc)
            elif partition in grace and self.may_emit(partition):
                # Given back while still handing it over: nobody else has emitted since this
                # member's own term, so there is nobody to wait for.
                self._takeover.end_grace(partition)
            elif self._over(partition):
                self._drop(partition)  # flush, release
            elif not self.may_emit(partition):
                # The standby tail has not seen the end of k lately: the input waits, paused,
                # until it has. Dropping here would leave the partition silent until the
                # successor takes it up (seen in the fault drill: 12 s on a loaded machine).
                # A partition with nothing emitted lately gives the tail nothing of this
                # member's to read back, so it would stay "stale" until the end of the
                # hand-over (the fault drill, again): a tick gives it something.
                self._tick(lc)

    def _tend_given_back(self, lc: PartitionLifecycle) -> None:
        """A partition being handed over that NELI gave back to this member (an eager
        rebalance that left it here, or a later one).

        It goes on under its term, without a takeover, if nobody else began one since: the
        standby tail has read everything appended up to a moment after the partition came
        back, with no probe or takeover marker of another member after this member's term.
        Anyone who led the partition meanwhile wrote its marker while it led, which was before
        NELI gave the partition back. If somebody did, the partition is dropped and taken up
        afresh (a takeover: the other member fenced, new marks). Until the tail has read that
        far (a tick gives it something to read back), the hand-over's rule goes on deciding
        whether it may emit.
        """
        partition = lc.partition
        now = time.monotonic()
        if lc.given_back is None:
            lc.given_back = now
        since = lc.given_back
        term = lc.term
        if term is not None and self._standby.unrequested_within(
            partition, term, now - since, self._read_as_of
        ):
            lc.move(PartitionState.OWNING)  # it goes on under its term, led by NELI again
            lc.handover_until = lc.handover_began = lc.given_back = None
            lc.handover_ticked = float("-inf")
        elif term is None or self._standby.requested_after(partition, term):
            lc.given_back = None
            log.info(
                "partition %d came back after another member's term: taken up afresh", partition
            )
            self._drop(partition)
        else:
            self._tick(lc)

    def _tick(self, lc: PartitionLifecycle) -> None:
        now = time.monotonic()
        if now - lc.handover_ticked >= _TICK_EVERY_S:
            lc.handover_ticked = now
            self._control.tick(lc.partition)

    def _over(self, partition: int) -> bool:
        """A hand-over ends when the successor asked, or its bound passed while the partition
        is no longer assigned to this member.

        One that NELI still assigns to this member (fenced, not revoked: its own heartbeats
        late) has no successor the group knows of, and the rule this member emits under does
        not rest on the bound: it goes on. Ending it there only silenced the partition until
        NELI resumed it and a takeover followed: 12 s in a fault drill on a saturated machine,
        where fences and resumes came every second and each resume was fenced again before
        the given-back check (:meth:`_tend_given_back`) could complete.
        """
        lc = self._lifecycles[partition]
        if not lc.handing_over or lc.term is None:
            return True
        return self._standby.requested_after(partition, lc.term) or self._expired(lc)

    def _expired(self, lc: PartitionLifecycle) -> bool:
        """The bound has passed, and the partition is no longer assigned to this member."""
        return (
            lc.handover_until is not None
            and time.monotonic() >= lc.handover_until
            and self._takeover.assigned_since(lc.partition) is None
        )
