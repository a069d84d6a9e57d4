"""The successor's grace period: a request on each partition, and the grace period ended early.

A relay member that NELI assigns partition k first asks for it while in its grace period,
with a control record on ``prices[k]`` ("I am next"), watched until the standby tail finds the
partition released, which ends the grace period at once (:meth:`GracePeriods.probe`,
:meth:`GracePeriods.end_graces`).

**Without fencing the request is the takeover marker itself** (an *early* marker). The old
owner handing k over stops on seeing it, flushes and writes its release, which lands above the
marker; the release is the proof that ends the grace period (nothing of that owner's can
follow it), and the takeover (:mod:`.succession`) then starts under the early marker from the
marks read up to the release: no marker of its own to write and read back once NELI gives it
k, which was one produce and one read-back (about 0.1 s of a 0.4 s move on a loaded machine)
on every planned move's critical path. A takeover marker carries nothing a probe did not
(both are requests: :mod:`.control`); what changes is that this member's term now begins
before NELI leads k, so a partition revoked before this member took it up ends that term
before it began (a release saying whether it found k released: :meth:`GracePeriods.probe`),
and a takeover whose early marker is no longer the latest term writes a new one (the checks
of :mod:`.succession` then see the other term).

**With fencing the request is a probe**: a takeover marker is written by the partition's
transactional producer, whose ``init_transactions`` fences the current owner at the broker,
which must wait until NELI leads k. A partition not released within ``_FENCED_WAIT_S`` of the
probe ends its grace period too: the takeover's marker fences whoever still owns it.

What this member noted in asking (when and where its request was acknowledged, where its tail
was when it first saw the partition in its grace period, its early marker and the state just
below it, which grace periods a clean release ended) is what the takeover bases its waits and
checks on: it reads it here and uses it up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from pricing_ha.dedupe.control import PROBE, RELEASE, TAKEOVER, Snapshot
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.output_producers import outcome_known_after_s
from pricing_ha.dedupe.own_terms import OwnTerms
from pricing_ha.dedupe.standby import StandbyTail

__all__ = ["GracePeriods", "GraceSource"]

log = logging.getLogger("pricing_ha.relay")

_PROBE_TIMEOUT_S = 1.0  # a probe's acknowledgement
_RELEASE_TIMEOUT_S = 2.0  # the release of an early marker whose partition was revoked
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

    def assigned_since(self, partition: int) -> float | None:
        """When ``partition`` was assigned to this member, or ``None`` if it is not."""


class GracePeriods:
    """This member's probes on partitions in their grace period, and their early ends.

    Args:
        standby: this member's tail of ``prices``.
        control: writes the member's requests (probes, early markers) and releases.
        neli: ends grace periods, and says whether a stall holds this member off.
        output_timeout_s: the ``message.timeout.ms`` of the producer the requests go through.
            An early marker's acknowledgement is waited for until it has either landed or
            failed: one given up on sooner could still land, unknown to this member, as a term
            nobody ends.
        own: the terms this member began (:mod:`.own_terms`): one of them, ended and settled,
            below an early marker ends the grace period as a release would.
    """

    def __init__(
        self,
        standby: StandbyTail,
        control: ControlWriter,
        neli: GraceSource,
        *,
        output_timeout_s: float,
        own: OwnTerms,
    ) -> None:
        """Nothing asked for yet."""
        self._early_timeout_s = outcome_known_after_s(output_timeout_s)
        self._own = own
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
        # Without fencing: partition -> offset of this member's early takeover marker (its
        # request), until the takeover uses it or the grace period ends unled; and the state
        # just below it, once the tail has passed it.
        self._early: dict[int, int] = {}
        self._early_snap: dict[int, Snapshot] = {}
        self._early_at: dict[int, float] = {}  # and a monotonic time before it was produced

    def probe(
        self,
        grace: frozenset[int],
        taken: set[int],
        handing_over: set[int],
        of_interest: Callable[[int], bool],
    ) -> list[int]:
        """Ask for the partitions in their grace period not asked for yet (a probe, or without
        fencing an early takeover marker); the ones just asked for. An early marker whose
        partition was revoked before this member took it up is released.

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
        # (Not merely "not led": a grace period ended early leaves the partition unled until
        # this member's own first heartbeat on it has come back.)
        for partition in [
            p for p in self._early if not of_interest(p) and self._neli.assigned_since(p) is None
        ]:
            self._release_early(partition)
        # No probe before the tail has read the partition's history, nor while a stall holds
        # this member off (S + 0.5 s after it woke): either would end a hand-over that should
        # go on until this member can take over (see .succession). Seen in the fault drill: a
        # relay woken from a pause probed at once and its partitions were silent for ~4 s.
        todo = sorted(
            p for p in grace - set(self._probes) - handing_over if self._standby.caught_up(p)
        )
        if not todo or self._neli.recovering():
            return []
        early = not self._control.fencing
        kind = TAKEOVER if early else PROBE
        timeout_s = self._early_timeout_s if early else _PROBE_TIMEOUT_S
        asked = time.monotonic()
        probes = self._control.write_markers(todo, kind, timeout_s=timeout_s)
        log.info(
            "asked for partitions in their grace period (%s markers): %s", kind.decode(), probes
        )
        self._probes.update(probes)
        if early:
            for partition, offset in probes.items():
                self._early[partition] = offset
                self._early_at[partition] = asked
                self._early_snap.pop(partition, None)
        acked = time.monotonic()
        self._probe_acked.update(dict.fromkeys(probes, acked))
        self._probe_at.update(probes)
        return todo

    def end_graces(self) -> list[int]:
        """End the grace period of each partition asked for that the tail finds released:
        cleanly after the probe, or (an early marker) above or below it with nothing but the
        marker after (:meth:`~.standby.StandbyTail.released_above`), or below an early marker
        whose latest term is this member's own, ended and settled before the marker
        (:meth:`~.own_terms.OwnTerms.settled`: as good as released); with fencing, also of one
        not released within ``_FENCED_WAIT_S`` (the takeover fences its owner). Returns the
        partitions whose grace period ended."""
        now = time.monotonic()
        ended = []
        for partition, offset in sorted(self._probes.items()):
            if partition in self._early:
                released = self._released_above_early(partition) or self._own_settled(partition)
            else:
                released = self._standby.clean_after(partition, offset)
            if released and self._neli.end_grace(partition):
                if partition not in self._early:
                    self._waived.add(partition)  # (an early marker is rechecked as it is)
                del self._probes[partition]
                ended.append(partition)
                log.info("partition %d was released: no grace period", partition)
            elif (
                self._control.fencing
                and now - self._probe_acked.get(partition, now) >= _FENCED_WAIT_S
                and self._neli.end_grace(partition)
            ):
                # Not released (its owner crashed, or is cut off): the takeover fences it.
                del self._probes[partition]
                ended.append(partition)
                log.info("partition %d was not released: taken over by fencing", partition)
        return ended

    def _early_mark(self, partition: int) -> Snapshot | None:
        """The state just below this member's early marker on ``partition``, once the tail
        has passed it."""
        snap = self._early_snap.get(partition)
        if snap is None:
            snap = self._standby.snapshot_at(partition, self._early[partition], 0.0)
            if snap is not None:
                self._early_snap[partition] = snap
        return snap

    def _own_settled(self, partition: int) -> bool:
        mark = self._early_mark(partition)
        return mark is not None and self._own.settled(partition, mark, self._early_at[partition])

    def _released_above_early(self, partition: int) -> bool:
        mark = self._early_mark(partition)
        return mark is not None and self._standby.released_above(partition, mark) is not None

    def _release_early(self, partition: int) -> None:
        """End the term of an early marker whose partition NELI revoked before this member
        took it up: a release naming it, which says whether the
        partition was released when this member stopped asking (``before`` = ``unclean`` if
        not: an earlier owner may still be emitting, and the partition must not look
        released). Without it, whoever is next would wait for a release nobody writes."""
        offset = self._early[partition]
        mark = self._early_mark(partition)
        # (A term of this member's own below it, ended and settled, is as good as released.)
        clean = self._released_above_early(partition) or self._own_settled(partition)
        del self._early[partition]
        self._early_snap.pop(partition, None)
        self._early_at.pop(partition, None)
        released = self._control.write_markers(
            [partition],
            RELEASE,
            _RELEASE_TIMEOUT_S,
            terms={partition: offset},
            unclean=() if clean else (partition,),
            below={} if mark is None else {partition: (mark.term, mark.term_wall)},
        )
        log.info(
            "partition %d: revoked before it was taken up; early takeover marker at offset %d "
            "released (%s)%s",
            partition,
            offset,
            "clean" if clean else "the partition was not released",
            "" if partition in released else ": the release was not acknowledged",
        )

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

    def take_early(self, partitions: list[int]) -> dict[int, tuple[int, Snapshot | None, float]]:
        """This member's early markers on those of ``partitions`` that have one: offset, the
        state just below it if the tail has passed it, and a monotonic time before it was
        produced; forgotten here (the takeover starts under the marker, or writes a new
        one)."""
        taken = {}
        for partition in partitions:
            if partition in self._early:
                taken[partition] = (
                    self._early[partition],
                    self._early_mark(partition),
                    self._early_at.pop(partition),
                )
                del self._early[partition]
                self._early_snap.pop(partition, None)
        return taken

    def waived(self, partition: int) -> bool:
        """Whether a clean release ended ``partition``'s grace period (and no takeover has
        used that up yet)."""
        return partition in self._waived

    def drop_waiver(self, partition: int) -> None:
        """Forget that a clean release ended ``partition``'s grace period."""
        self._waived.discard(partition)
