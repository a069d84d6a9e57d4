"""What a relay member looks after between batches: grace periods, hand-overs, suspicions.

:class:`RelayTending` is the part of the relay's partition worker
(:class:`~.relay_worker.RelayWorker`) that runs every ``_TEND_EVERY_S`` in the worker thread,
whatever the input (:meth:`RelayTending.tend`):

* partitions being **handed over** stop once their successor asks, or the bound passes
  (:mod:`.handover`);
* partitions in their **grace period** are probed, read ahead (:mod:`.read_ahead`) and taken
  up as soon as a clean release ends the grace period (:mod:`.grace_period`); one taken up
  that way which NELI revokes before reporting it acquired is let go;
* partitions found **quiet** by the takeover detector are taken over on suspicion
  (:mod:`.suspicion`);
* an owner's **checkpoints** are written (:mod:`.control_writer`).

The parts it drives are built, and the takeover itself is done, by
:class:`~.relay_worker.RelayWorker`; this class only declares them.
"""

from __future__ import annotations

import logging
import threading
import time

from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.detector import Detector
from pricing_ha.dedupe.grace_period import GracePeriods
from pricing_ha.dedupe.handover import HandOvers
from pricing_ha.dedupe.hot_path import HotPath
from pricing_ha.dedupe.lifecycle import PartitionLifecycle, PartitionState
from pricing_ha.dedupe.raw_input import RawInput
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.dedupe.succession import LeadershipSource
from pricing_ha.dedupe.suspicion import Suspicions
from pricing_ha.member.worker import PartitionWorker

__all__ = ["RelayTending"]

log = logging.getLogger("pricing_ha.relay")

_TEND_EVERY_S = 0.02  # how often hand-overs and grace periods are looked at


class RelayTending(PartitionWorker):
    """Grace periods, hand-overs, suspicions and checkpoints (see the module docstring).

    Its parts are set by :class:`~.relay_worker.RelayWorker`'s constructor.
    """

    _neli: LeadershipSource
    _hot: HotPath
    _raw: RawInput
    _control: ControlWriter
    _handovers: HandOvers
    _grace: GracePeriods
    _next_tend: float
    _events: int  # NELI's events for this worker so far (counted on the event loop)
    standby: StandbyTail
    read_ahead: ReadAhead
    lifecycles: dict[int, PartitionLifecycle]
    suspicions: Suspicions | None

    def _may_emit(self, partition: int) -> bool:
        """Whether a record may be produced to ``prices[partition]`` at this instant.

        Led (NELI says so now), or being handed over and the hand-over's rule allows it
        (:meth:`.handover.HandOvers.may_emit`): that rule decides even once NELI leads the
        partition again (given back), because the term this member emits under is the one
        from before the revocation, and somebody else may have taken one since.
        """
        if self.lifecycles[partition].handing_over:
            # Not while NELI's stall guard holds this process off: a pause that stopped the
            # monotonic clock would leave the tail looking fresh while a successor's request
            # waits unread (a hand-over after FENCED is exactly that case).
            return not self._neli.takeover.recovering() and self._handovers.may_emit(partition)
        return self._neli.leads(partition)

    @property
    def _terms(self) -> dict[int, int]:
        """This member's terms: partition -> offset of its takeover marker (OWNING or
        HANDING_OVER; a view of :attr:`lifecycles`)."""
        return {p: lc.term for p, lc in self.lifecycles.items() if lc.term is not None}

    def request(self, op: str, partition: int) -> threading.Event:
        """Queue NELI's event as a command (:class:`~pricing_ha.member.worker.PartitionWorker`),
        counted first: a partition taken up as its grace period ended is NELI's to report on
        from its first event after that (:meth:`_tend_taken_early`)."""
        self.lifecycles[partition].last_event = self._events
        self._events += 1
        return super().request(op, partition)

    def tend(self) -> None:
        """Hand-overs, grace periods and checkpoints, looked at every ``_TEND_EVERY_S``.

        * A partition this member is handing over stops (flush, then release marker) once
          the successor has asked or the bound has passed; one NELI gives back to this member
          simply goes on (no takeover: nobody else emitted).
        * A partition in its grace period gets a probe (a control record: "I am next"), then
          is watched until the standby finds it *cleanly released* (the latest owner's release
          marker is the last word on ``prices[k]``: see :mod:`pricing_ha.dedupe.standby`).
          Nobody is then left who could append to it, so the grace period is ended
          (:meth:`neli.takeover.Takeover.end_grace`) and the partition taken up at once. With
          the previous owner handing over, a planned move (SIGTERM, a member joining) costs the
          probe's and the release's round trips, not a rebalance plus S + T; with no release
          0.3 s after the probe, the takeover fences the previous owner.
        """
        now = time.monotonic()
        if now < self._next_tend:
            return
        self._next_tend = now + _TEND_EVERY_S
        self._hot.tend(now)  # partitions paused mid-batch: resumed, or dropped
        grace = self._neli.takeover.in_grace()
        self._tend_taken_early()
        self._handovers.tend(grace)
        self._tend_grace(grace)
        if self.suspicions is not None:
            busy = self.active | self.wanted | set(self.deferred) | grace
            self.suspicions.tend(now, busy | self._handovers.partitions())
        self._control.write_checkpoints(now, self._terms, self._may_emit, self.standby.checkpoint)

    def _tend_grace(self, grace: frozenset[int]) -> None:
        """Probe partitions in their grace period, read them ahead, end the grace periods
        that a clean release allows (:mod:`.grace_period`)."""

        def of_interest(partition: int) -> bool:
            return partition in grace or partition in self.wanted or self._neli.leads(partition)

        self._grace.forget(self.wanted, grace)
        probed = self._grace.probe(grace, self._handovers.partitions())
        if probed:
            self._read_ahead(probed)
        self.read_ahead.tend(of_interest)
        # A partition whose grace period just ended is led now (NELI's own heartbeat on it has
        # long come back): take it up in this turn. NELI's ACQUIRED reaches this thread as an
        # assign command only after its next evaluation and this thread's next turn (17 and
        # 48 ms at the median of a loaded machine's planned moves), and finds it active.
        # NELI reports no REVOKED for a partition it never reported ACQUIRED, so one revoked
        # in between is let go here (:meth:`_tend_taken_early`).
        events = self._events
        ended = self._grace.end_graces()
        led = [p for p in ended if self._neli.leads(p)]
        if led:
            self.wanted.update(led)
            for p in led:
                self.lifecycles[p].taken_early = (self._neli.takeover.assigned_since(p), events)
            self._take_up(led)
        for p in ended:  # not taken up (no longer led): its grace period is over here
            if self.lifecycles[p].state is PartitionState.PROBING:
                self.lifecycles[p].move(PartitionState.STANDBY)

    @property
    def detector(self) -> Detector | None:
        """The takeover detector (:mod:`.detector`), or ``None`` when detection is off."""
        return None if self.suspicions is None else self.suspicions.detector

    def _tend_taken_early(self) -> None:
        """Let go of a partition taken up as its grace period ended that NELI no longer
        assigns to this member (or assigned again since), as a revocation would (handed over,
        or stopped), in case NELI revoked it before reporting it ACQUIRED (then no REVOKED
        follows). A revocation that does reach this thread later finds it handed over
        already, or not worked on."""
        for lc in self.lifecycles.values():
            if lc.taken_early is None:
                continue
            partition, (since, events) = lc.partition, lc.taken_early
            if partition not in self.wanted or lc.last_event >= events:
                # NELI has reported an event for it since: its own events take it from here.
                lc.taken_early = None
            elif self._neli.takeover.assigned_since(partition) != since:
                lc.taken_early = None
                self.wanted.discard(partition)
                self.deferred.pop(partition, None)
                if partition in self.active and not self.hand_over(partition):
                    self.drop(partition)
                log.info("partition %d revoked before NELI reported it acquired", partition)

    def _read_ahead(self, partitions: list[int]) -> None:
        """Read partitions in their grace period ahead (:mod:`.read_ahead`), unless already."""
        self._raw.read_ahead(
            [p for p in partitions if p not in self.read_ahead and p not in self._hot.arbiters]
        )
