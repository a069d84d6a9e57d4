"""The successor's grace period: a probe on each partition, and the grace period ended early.

A relay member that NELI assigns partition k first asks for it while in its grace period,
with a probe on ``prices[k]`` ("I am next"), watched until the standby tail finds the
partition cleanly released, which ends the grace period at once (:meth:`GracePeriods.probe`,
:meth:`GracePeriods.end_graces`). An owner handing k over sees the probe, flushes and
releases: a planned move costs the probe's and the release's round trips.

A partition not released within ``_FENCED_WAIT_S`` of the probe (its owner crashed, is
paused, or is cut off) ends its grace period too: the takeover's marker is written by the
partition's transactional producer, whose ``init_transactions`` fences whoever still owns it
at the broker (:mod:`.succession`).

NELI may also end a grace period on evidence before any probe: when the group took longer
than T + e to assign the partition (a member leaving: the others learn of the rebalance at
their next group heartbeat), the previous holder's last heartbeat is already that old. Its
owner may still be emitting then, handing the partition over; fencing it at once would abort
its open transaction (its records re-emitted, and ``init_transactions`` waiting for the
abort: the slowest planned moves of the takeover benchmark). So a partition taken over with no
grace period left, whose latest term is another member's, not released, and with a price on it
since this member was assigned it, is asked for first (:meth:`GracePeriods.hold_for_release`):
a probe, then the takeover once it is released, or ``_FENCED_WAIT_S`` after the probe.

A partition probed moves from STANDBY to PROBING (:mod:`.lifecycle`); the probe itself is
kept on its :class:`~.lifecycle.PartitionLifecycle` until its grace period is over. One whose
grace period ended is taken up by the worker (TAKING_OVER), or goes back to STANDBY.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping

from neli.takeover import Takeover
from pricing_ha.dedupe.control import PROBE
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.lifecycle import PartitionLifecycle, PartitionState
from pricing_ha.dedupe.standby import StandbyTail

__all__ = ["GracePeriods"]

log = logging.getLogger("pricing_ha.relay")

_PROBE_TIMEOUT_S = 1.0  # a probe's acknowledgement
# A successor whose probe found the partition not released within this long ends its grace
# period and takes over: its init_transactions fences whoever still owns it. An owner handing
# over sees the probe and releases well within it (a tail read and a commit).
_FENCED_WAIT_S = 0.3


class GracePeriods:
    """This member's probes on partitions in their grace period, and their early ends.

    Args:
        standby: this member's tail of ``prices``.
        control: writes the member's probes.
        takeover: NELI's hand-over hooks (``neli.takeover``): ends grace periods, and says
            whether a stall holds this member off.
        lifecycles: the member's partitions (shared with the worker), where each probe is kept.
        clock_skew_s: e, the bound on the clock skew between members (price timestamps are
            compared with NELI's assignment time).
    """

    def __init__(
        self,
        standby: StandbyTail,
        control: ControlWriter,
        takeover: Takeover,
        lifecycles: Mapping[int, PartitionLifecycle],
        *,
        clock_skew_s: float,
    ) -> None:
        """Nothing asked for yet."""
        self._clock_skew_s = clock_skew_s
        self._standby = standby
        self._control = control
        self._takeover = takeover
        self._lifecycles = lifecycles

    @property
    def _probes(self) -> dict[int, tuple[int, float]]:
        """The partitions probed in their grace period: offset of the probe, when acknowledged
        (a view of the lifecycles, for tests and logs)."""
        return {p: lc.probe for p, lc in self._lifecycles.items() if lc.probe is not None}

    def probe(self, grace: frozenset[int], handing_over: set[int]) -> list[int]:
        """Probe the partitions in their grace period not probed yet; the ones just probed.

        Args:
            grace: the partitions in their grace period now.
            handing_over: the partitions this member is handing over.
        """
        for lc in self._lifecycles.values():
            if lc.probe is not None and lc.partition not in grace:
                lc.probe = None
                if lc.state is PartitionState.PROBING:
                    lc.move(PartitionState.STANDBY)
        # No probe before the tail has read the partition's history, nor while a stall holds
        # this member off (S + 0.5 s after it woke): either would end a hand-over that should
        # go on until this member can take over (see .handover). Seen in the fault drill: a
        # relay woken from a pause probed at once and its partitions were silent for ~4 s.
        todo = sorted(
            p for p in grace - set(self._probes) - handing_over if self._standby.caught_up(p)
        )
        if not todo or self._takeover.recovering():
            return []
        self._control.prepare_takeovers(todo)  # connecting while the owner releases
        probes = self._control.write_markers(todo, PROBE, timeout_s=_PROBE_TIMEOUT_S)
        log.info("probed partitions in their grace period: %s", probes)
        acked = time.monotonic()
        for p, offset in probes.items():
            lc = self._lifecycles[p]
            lc.probe = (offset, acked)
            if lc.state is PartitionState.STANDBY:
                lc.move(PartitionState.PROBING)
        return todo

    def hold_for_release(self, partitions: list[int]) -> dict[int, str]:
        """Of ``partitions`` about to be taken over outside a grace period, those to hold back
        until their owner has released them (see the module docstring): partition -> why.

        A partition asked for earlier goes ahead once the tail finds it cleanly released after
        the probe, or ``_FENCED_WAIT_S`` after it (the takeover then fences the owner). One
        not asked for yet is asked for (a probe) if another member's unreleased term is the
        latest and the tail has read a price on it stamped after (within e of) this member's
        assignment: its owner is alive. Without such a price (it crashed, or is paused),
        nothing is held; nor is a partition whose grace period ended unanswered
        (:meth:`end_graces`): it was asked already.
        """
        now = time.monotonic()
        held: dict[int, str] = {}
        todo: list[int] = []
        for partition in partitions:
            lc = self._lifecycles[partition]
            if lc.asked is not None:
                offset, acked = lc.asked
                if self._standby.clean_after(partition, offset) or now - acked >= _FENCED_WAIT_S:
                    lc.asked = None
                    continue
                held[partition] = "its owner, asked to release it, has not yet"
            elif self._owner_emitting(partition):
                todo.append(partition)
        if todo and not self._takeover.recovering():
            self._control.prepare_takeovers(todo)
            probes = self._control.write_markers(todo, PROBE, timeout_s=_PROBE_TIMEOUT_S)
            log.info("probed partitions whose owner is still emitting: %s", probes)
            acked = time.monotonic()
            for partition, offset in probes.items():
                self._lifecycles[partition].asked = (offset, acked)
                held[partition] = "its owner, still emitting, was asked to release it"
        return held

    def forget(self, wanted: Collection[int], grace: Collection[int]) -> None:
        """Forget the requests of partitions no longer assigned to this member (``wanted``),
        and let go of the producers prepared for partitions neither wanted nor in their grace
        period (``grace``)."""
        for lc in self._lifecycles.values():
            if lc.asked is not None and lc.partition not in wanted:
                lc.asked = None
        self._control.forget_prepared({*wanted, *grace})

    def _owner_emitting(self, partition: int) -> bool:
        """Whether another member holds the latest, unreleased term on ``partition`` and the
        tail has read a price of the partition since this member was assigned it."""
        since = self._takeover.assigned_since(partition)
        if since is None or not self._standby.caught_up(partition):
            return False
        if not self._standby.held_by_other(partition):
            return False
        # Both wall times, the price's by its writer's clock: good to within e. A crashed or
        # paused owner's last price is older than its last heartbeat plus a pulse, which NELI
        # found more than T + e old when it ended the grace period on evidence.
        return self._standby.last_price_wall(partition) > since - self._clock_skew_s

    def end_graces(self) -> list[int]:
        """End the grace period of each partition probed that the tail finds cleanly released
        after the probe, or that is not released within ``_FENCED_WAIT_S`` of the probe (the
        takeover fences its owner). Returns the partitions whose grace period ended; those
        still PROBING are for the worker to take up (TAKING_OVER) or let go (STANDBY)."""
        now = time.monotonic()
        ended = []
        for partition, (offset, acked) in sorted(self._probes.items()):
            lc = self._lifecycles[partition]
            if self._standby.clean_after(partition, offset) and self._takeover.end_grace(partition):
                lc.probe = None
                ended.append(partition)
                log.info("partition %d was released: no grace period", partition)
            elif now - acked >= _FENCED_WAIT_S and self._takeover.end_grace(partition):
                # Not released (its owner crashed, or is cut off): the takeover fences it,
                # without asking again (hold_for_release).
                lc.probe = None
                lc.asked = (offset, acked)
                ended.append(partition)
                log.info("partition %d was not released: taken over by fencing", partition)
        return ended
