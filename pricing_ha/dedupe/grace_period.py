"""The successor's grace period: a probe on each partition, and the grace period ended early.

A relay member that NELI assigns partition k first asks for it: a probe on ``prices[k]``
("I am next") while in its grace period, watched until the standby tail finds the partition
*cleanly released* (the latest owner's release marker is the last word), which ends the grace
period at once (:meth:`GracePeriods.probe`, :meth:`GracePeriods.end_graces`). With fencing, a
partition not released within ``_FENCED_WAIT_S`` of the probe ends it too: the takeover's
marker fences whoever still owns it.

What this member noted in asking (when and where its probe was acknowledged, where its tail
was when it first saw the partition in its grace period, which grace periods a clean release
ended) is what the takeover (:mod:`.succession`) bases its waits and checks on: it reads it
here and uses it up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from pricing_ha.dedupe.control import PROBE
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.standby import StandbyTail

__all__ = ["GracePeriods", "GraceSource"]

log = logging.getLogger("pricing_ha.relay")

_PROBE_TIMEOUT_S = 1.0  # a probe's acknowledgement, and the tail reaching it
# With fencing, a successor whose probe found the partition not released within this long
# ends its grace period and takes over: its init_transactions fences whoever still owns it.
# An owner handing over sees the probe and releases well within it (a tail read and a commit).
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
        self._probes: dict[int, int] = {}  # in their grace period: offset of this member's probe
        self._probe_acked: dict[int, float] = {}  # when that probe was acknowledged (monotonic)
        self._probe_at: dict[int, int] = {}  # and its offset (kept as long as _probe_acked)
        # partition -> where the tail was when this member first saw it in its grace period
        # (a probe's stand-in, for a member that could not probe: held off by a stall, or
        # its grace period ended on NELI's evidence before it could)
        self._asked_at: dict[int, int] = {}
        self._waived: set[int] = set()  # grace ended by a clean release: recheck at takeover

    def probe(
        self,
        grace: frozenset[int],
        taken: set[int],
        handing_over: set[int],
        of_interest: Callable[[int], bool],
    ) -> list[int]:
        """Probe the partitions in their grace period not probed yet; the ones just probed.

        Args:
            grace: the partitions in their grace period now.
            taken: the partitions this member holds a term on.
            handing_over: the partitions this member is handing over.
            of_interest: whether this member still cares about a partition (in its grace
                period, assigned, or led): what it noted about the others is forgotten.
        """
        for partition in list(self._probes):
            if partition not in grace:
                del self._probes[partition]
        for partition in grace - taken:
            self._asked_at.setdefault(partition, self._standby.position(partition))
        for partition in [p for p in self._asked_at if not of_interest(p)]:
            del self._asked_at[partition]
        # Probes are kept while led: NELI ends the grace period before its ACQUIRED event
        # reaches this thread as an assign, and the takeover needs the probe's age (without
        # it, Succession.establish waits 1.2 s for a release a crashed owner never writes).
        for partition in [p for p in self._probe_acked if not of_interest(p)]:
            del self._probe_acked[partition]
            self._probe_at.pop(partition, None)
        # No probe before the tail has read the partition's history, nor while a stall holds
        # this member off (S + 0.5 s after it woke): either would end a hand-over that should
        # go on until this member can take over (see .succession). Seen in the fault drill: a
        # relay woken from a pause probed at once and its partitions were silent for ~4 s.
        todo = sorted(
            p for p in grace - set(self._probes) - handing_over if self._standby.caught_up(p)
        )
        if not todo or self._neli.recovering():
            return []
        probes = self._control.write_markers(todo, PROBE, timeout_s=_PROBE_TIMEOUT_S)
        log.info("probed partitions in their grace period: %s", probes)
        self._probes.update(probes)
        acked = time.monotonic()
        self._probe_acked.update(dict.fromkeys(probes, acked))
        self._probe_at.update(probes)
        return todo

    def end_graces(self) -> None:
        """End the grace period of each probed partition the tail finds cleanly released
        (with fencing, also of one not released within ``_FENCED_WAIT_S``: the takeover
        fences its owner)."""
        now = time.monotonic()
        for partition, offset in sorted(self._probes.items()):
            if self._standby.clean_after(partition, offset) and self._neli.end_grace(partition):
                self._waived.add(partition)
                del self._probes[partition]
                log.info("partition %d was released cleanly: no grace period", partition)
            elif (
                self._control.fencing
                and now - self._probe_acked.get(partition, now) >= _FENCED_WAIT_S
                and self._neli.end_grace(partition)
            ):
                # Not released (its owner crashed, or is cut off): the takeover fences it.
                del self._probes[partition]
                log.info("partition %d was not released: taken over by fencing", partition)

    # -- what the takeover reads here, and uses up (.succession) -------------------------------

    def acked_at(self, partition: int, default: float) -> float:
        """When this member's probe on ``partition`` was acknowledged (monotonic), else
        ``default``."""
        return self._probe_acked.get(partition, default)

    def take_acked(self, partitions: list[int]) -> dict[int, float]:
        """When this member's probes on those of ``partitions`` it probed were acknowledged
        (monotonic); forgotten here."""
        return {p: self._probe_acked.pop(p) for p in partitions if p in self._probe_acked}

    def take_asked(self, partitions: list[int]) -> dict[int, int]:
        """Where this member asked for each of ``partitions`` it asked for: its probe's
        offset, or where its tail was when it first saw the partition in its grace period,
        whichever is lower; forgotten here."""
        asked = {p: self._probe_at.pop(p) for p in partitions if p in self._probe_at}
        for p in partitions:
            seen = self._asked_at.pop(p, None)
            if seen is not None:
                asked[p] = min(asked.get(p, seen), seen)
        return asked

    def waived(self, partition: int) -> bool:
        """Whether a clean release ended ``partition``'s grace period (and no takeover has
        used that up yet)."""
        return partition in self._waived

    def drop_waiver(self, partition: int) -> None:
        """Forget that a clean release ended ``partition``'s grace period."""
        self._waived.discard(partition)
