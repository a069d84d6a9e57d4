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
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from pricing_ha.dedupe.control import PROBE
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.standby import StandbyTail

__all__ = ["GracePeriods", "GraceSource"]

log = logging.getLogger("pricing_ha.relay")

_PROBE_TIMEOUT_S = 1.0  # a probe's acknowledgement
# A successor whose probe found the partition not released within this long ends its grace
# period and takes over: its init_transactions fences whoever still owns it. An owner handing
# over sees the probe and releases well within it (a tail read and a commit).
_FENCED_WAIT_S = 0.3


class GraceSource(Protocol):
    """What the grace period asks NELI (:class:`neli.Neli`, or a fake)."""

    def end_grace(self, partition: int) -> bool:
        """End ``partition``'s grace period (proof in hand)."""

    def recovering(self) -> bool:
        """Whether a stall holds this member off leading anything now."""


class GracePeriods:
    """This member's probes on partitions in their grace period, and their early ends.

    Args:
        standby: this member's tail of ``prices``.
        control: writes the member's probes.
        neli: ends grace periods, and says whether a stall holds this member off.
    """

    def __init__(self, standby: StandbyTail, control: ControlWriter, neli: GraceSource) -> None:
        """Nothing asked for yet."""
        self._standby = standby
        self._control = control
        self._neli = neli
        # in their grace period: offset of this member's probe, when it was acknowledged
        self._probes: dict[int, tuple[int, float]] = {}

    def probe(self, grace: frozenset[int], handing_over: set[int]) -> list[int]:
        """Probe the partitions in their grace period not probed yet; the ones just probed.

        Args:
            grace: the partitions in their grace period now.
            handing_over: the partitions this member is handing over.
        """
        for partition in list(self._probes):
            if partition not in grace:
                del self._probes[partition]
        # No probe before the tail has read the partition's history, nor while a stall holds
        # this member off (S + 0.5 s after it woke): either would end a hand-over that should
        # go on until this member can take over (see .handover). Seen in the fault drill: a
        # relay woken from a pause probed at once and its partitions were silent for ~4 s.
        todo = sorted(
            p for p in grace - set(self._probes) - handing_over if self._standby.caught_up(p)
        )
        if not todo or self._neli.recovering():
            return []
        probes = self._control.write_markers(todo, PROBE, timeout_s=_PROBE_TIMEOUT_S)
        log.info("probed partitions in their grace period: %s", probes)
        acked = time.monotonic()
        self._probes.update({p: (offset, acked) for p, offset in probes.items()})
        return todo

    def end_graces(self) -> list[int]:
        """End the grace period of each partition probed that the tail finds cleanly released
        after the probe, or that is not released within ``_FENCED_WAIT_S`` of the probe (the
        takeover fences its owner). Returns the partitions whose grace period ended."""
        now = time.monotonic()
        ended = []
        for partition, (offset, acked) in sorted(self._probes.items()):
            if self._standby.clean_after(partition, offset) and self._neli.end_grace(partition):
                del self._probes[partition]
                ended.append(partition)
                log.info("partition %d was released: no grace period", partition)
            elif now - acked >= _FENCED_WAIT_S and self._neli.end_grace(partition):
                # Not released (its owner crashed, or is cut off): the takeover fences it.
                del self._probes[partition]
                ended.append(partition)
                log.info("partition %d was not released: taken over by fencing", partition)
        return ended
