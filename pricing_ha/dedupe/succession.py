"""The successor's side of a move: what must be established before emitting on ``prices[k]``.

A relay member that NELI assigns partition k first asks for it in its grace period (a probe
on ``prices[k]``: "I am next"), which a clean release, or 0.3 s without one, ends early: that
is :mod:`.grace_period`.

This module holds the takeover (:meth:`Succession.establish`). The partition's transactional
producer runs ``init_transactions``, which fences the previous owner at the broker (it can no
longer append to ``prices[k]``, and its open transaction is aborted), then writes a takeover
marker; the marker, acknowledged, gives the end of ``prices[k]`` by offset rather than by
asking the broker, and the standby's high-water marks just before it are where emitting
starts. Nothing of a previous owner can land above the marker, so nothing needs waiting for.
A partition no longer led once the marker is in place ends this member's term before it
began.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Protocol

from neli.takeover import Takeover
from pricing_ha.dedupe.control import RELEASE, TAKEOVER, Snapshot
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.member.worker import TakeoverDeferredError

__all__ = ["LeadershipSource", "Succession"]

log = logging.getLogger("pricing_ha.relay")

MARKER_TIMEOUT_S = 5.0  # a takeover or release marker's acknowledgement
_CATCH_UP_S = 5.0  # the standby tail reaching a takeover marker (else: deferred, retried)


class LeadershipSource(Protocol):
    """What the relay worker asks NELI (:class:`neli.Neli`, or a fake)."""

    def leads(self, partition: int) -> bool:
        """Whether this member leads ``partition`` now."""

    @property
    def takeover(self) -> Takeover:
        """The hand-over and early-grace hooks (:mod:`neli.takeover`)."""


class Succession:
    """The checks that start (or defer) a takeover.

    Args:
        standby: this member's tail of ``prices``.
        control: writes the member's markers (through the partitions' fences).
        neli: whether this member still leads a partition.
    """

    def __init__(
        self, standby: StandbyTail, control: ControlWriter, neli: LeadershipSource
    ) -> None:
        """Nothing taken over yet."""
        self._standby = standby
        self._control = control
        self._neli = neli

    # -- the takeover -------------------------------------------------------------------------

    def establish(
        self,
        partitions: list[int],
        deferred: dict[int, TakeoverDeferredError],
        *,
        induced: Collection[int] = (),
    ) -> list[tuple[int, Snapshot]]:
        """The partitions whose takeover may start now, each with the marks to start from.

        For each k: fence the previous owner and write a takeover marker to ``prices[k]``,
        wait for its acknowledgement (the end of ``prices[k]`` is then known by offset, not
        by asking the broker), and take the high-water marks the standby tail had just before
        the marker (it reads every partition continuously, so this waits only for the short
        tail since its position). A partition whose marker is not acknowledged, or that the
        tail does not reach in time, goes to ``deferred`` and is tried again: never taken up on
        marks that might be incomplete. One no longer led by then is released and deferred.

        ``induced``: partitions taken over on suspicion (:mod:`.detector`), which NELI does not
        give this member: they are not given up for not being led.
        """
        snaps = self._mark_ends(partitions, deferred)
        ready = []
        for partition, snap in sorted(snaps.items()):
            if partition not in induced and not self._neli.leads(partition):
                # Revoked while taking it up: this term ends before it began.
                deferred[partition] = self._end_unbegun(
                    partition, snap, "no longer led when the takeover was ready", 0.05
                )
                continue
            ready.append((partition, snap))
        return ready

    def _end_unbegun(
        self, partition: int, snap: Snapshot, why: str, retry_after_s: float
    ) -> TakeoverDeferredError:
        """End the term of the takeover marker ``snap`` was captured at before it began.

        The release says so, so that whoever is next need not wait for it; but if an earlier
        term was still open below the marker, it says that too (``before`` = ``unclean``), and
        names that term (``below``): readers then take it as the latest again, and the
        partition does not look released unless its owner had released it. Returns the
        deferral to record.
        """
        self._control.write_markers(
            [partition],
            RELEASE,
            MARKER_TIMEOUT_S,
            terms={partition: snap.offset},
            unclean=() if snap.clean else (partition,),
            below={partition: (snap.term, snap.term_wall)},
        )
        return TakeoverDeferredError(why, retry_after_s=retry_after_s)

    def _mark_ends(
        self, partitions: list[int], deferred: dict[int, TakeoverDeferredError]
    ) -> dict[int, Snapshot]:
        """Write takeover markers and take the standby's state just before each one.

        Partitions whose marker was not acknowledged, or not reached by the tail in time, go
        to ``deferred`` (and are left out of the result).
        """
        ends = self._control.write_markers(partitions, TAKEOVER, timeout_s=MARKER_TIMEOUT_S)
        snaps: dict[int, Snapshot] = {}
        for partition in partitions:
            deferred.pop(partition, None)
            if partition not in ends:
                deferred[partition] = TakeoverDeferredError(
                    "the takeover marker was not acknowledged"
                )
                continue
            snap = self._standby.snapshot_at(partition, ends[partition], _CATCH_UP_S)
            if snap is None:
                deferred[partition] = TakeoverDeferredError(
                    f"the standby tail did not reach the takeover marker at offset "
                    f"{ends[partition]} within {_CATCH_UP_S:.0f} s",
                    retry_after_s=0.5,
                )
                continue
            snaps[partition] = snap
        return snaps
