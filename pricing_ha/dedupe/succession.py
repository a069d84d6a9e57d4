"""The successor's side of a move: what must be established before emitting on ``prices[k]``.

A relay member that NELI assigns partition k first asks for it in its grace period (a probe
on ``prices[k]``: "I am next"), which a clean release ends early: that is
:mod:`.grace_period`, whose :class:`~.grace_period.GracePeriods` the relay worker drives and
:class:`Succession` is given. The waits and checks below read what it noted in asking: when
the probe was acknowledged, where this member asked, whether a clean release waived the grace
period.

This module holds the takeover (:meth:`Succession.establish`): a takeover marker,
acknowledged, gives the end of ``prices[k]`` by offset rather than by asking the broker, and
the standby's high-water marks just before it are where emitting starts. Without fencing,
three things can still make it wait or give up:

* the partition was not released: the old owner may be handing it over and still emitting
  (it stops within :data:`~.handover.HANDOVER_FRESH_S` of seeing the request, and its output
  lands or expires ``output_timeout_ms`` after it was produced), or a crashed owner's output
  may still be in flight (it led at most T after its last heartbeat). Wait for the release or
  for that time. A release above the marker is the end (the owner stopped on seeing the
  marker and released once its output had landed); otherwise mark the end again;
* another member began a term after this member asked for the partition, or after NELI
  assigned it here: one of the two may be a zombie. End this term before it began, and retry
  after a grace period;
* the partition is no longer led by the time all that is done.

With fencing (a transactional producer per partition), the marker's ``init_transactions``
fences the previous owner at the broker, so nothing needs waiting for.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Collection
from typing import Protocol

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.control import RELEASE, TAKEOVER, Snapshot
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.grace_period import GracePeriods
from pricing_ha.dedupe.handover import HANDOVER_FRESH_S
from pricing_ha.dedupe.output_producers import outcome_known_after_s
from pricing_ha.dedupe.own_terms import OwnTerms
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.member.worker import TakeoverDeferredError

__all__ = ["LeadershipSource", "Succession"]

log = logging.getLogger("pricing_ha.relay")

MARKER_TIMEOUT_S = 5.0  # a takeover or release marker's acknowledgement
_CATCH_UP_S = 5.0  # the standby tail reaching a takeover marker (else: deferred, retried)
_OWN_MARKERS_KEPT = 8  # this member's latest takeover markers per partition, remembered
_MARGIN_S = 0.2


class LeadershipSource(Protocol):
    """What the relay worker asks NELI (:class:`neli.Neli`, or a fake)."""

    def leads(self, partition: int) -> bool:
        """Whether this member leads ``partition`` now."""

    def in_grace(self) -> frozenset[int]:
        """Assigned partitions still in their grace period."""

    def end_grace(self, partition: int) -> bool:
        """End ``partition``'s grace period (proof in hand)."""

    def recovering(self) -> bool:
        """Whether a stall holds this member off leading anything now."""

    def previous_holder_silent_s(self, partition: int) -> float | None:
        """Seconds since the previous holder's last heartbeat on ``partition``, if known."""

    def assigned_since(self, partition: int) -> float | None:
        """Wall time at which ``partition`` was assigned to this member, if it is."""


class Succession:
    """The checks that start (or defer) a takeover.

    Args:
        cfg: the application's configuration (the relay's T, e and S).
        standby: this member's tail of ``prices``.
        control: writes the member's markers.
        neli: leadership, grace periods and the previous holder's silence.
        grace: what this member noted in its grace periods (:mod:`.grace_period`).
        own: the terms this member began, and when it last produced (:mod:`.own_terms`).
    """

    def __init__(
        self,
        cfg: AppConfig,
        standby: StandbyTail,
        control: ControlWriter,
        neli: LeadershipSource,
        grace: GracePeriods,
        *,
        own: OwnTerms,
    ) -> None:
        """Nothing asked for yet."""
        relay = cfg.relay
        self._standby = standby
        self._control = control
        self._neli = neli
        self._threshold_s = relay.threshold_ms / 1000
        self._skew_s = relay.clock_skew_ms / 1000
        # From a previous holder's last heartbeat until all it produced while it led has landed
        # or expired: T (it led at most that long after it), e (the heartbeat's timestamp is
        # its clock), its output's message.timeout.ms. See _unclean_wait.
        self._output_expired_s = (
            relay.threshold_ms + relay.clock_skew_ms + relay.output_timeout_ms
        ) / 1000
        # From a request (probe or marker) to an owner handing over until all it produced
        # before it saw the request has landed or expired. See _unclean_wait.
        self._drained_s = HANDOVER_FRESH_S + outcome_known_after_s(relay.output_timeout_ms / 1000)
        #: Per partition, this member's latest takeover markers there (terms it began, or
        #: ended before they began), kept after the terms end.
        self._own_markers: dict[int, deque[int]] = {}
        #: What this member noted in asking for partitions in their grace period.
        self._grace = grace
        #: Per partition, the other member's term a takeover was last deferred for.
        self._deferred_for: dict[int, int] = {}
        self._own = own
        #: Per partition, a monotonic time before this member's latest marker was produced.
        self._marked_at: dict[int, float] = {}

    # -- the takeover -------------------------------------------------------------------------

    def establish(
        self,
        partitions: list[int],
        deferred: dict[int, TakeoverDeferredError],
        *,
        induced: Collection[int] = (),
    ) -> list[tuple[int, Snapshot]]:
        """The partitions whose takeover may start now, each with the marks to start from.

        For each k: write a takeover marker to ``prices[k]`` and wait for its acknowledgement
        (the end of ``prices[k]`` is then known by offset, not by asking the broker), and take
        the high-water marks the standby tail had just before the marker (it reads every
        partition continuously, so this waits only for the short tail since its position). A
        partition whose marker is not acknowledged, or that the tail does not reach in time,
        goes to ``deferred`` and is tried again: never taken up on marks that might be
        incomplete.

        Where the marker finds ``prices[k]`` not released, its previous owner may be handing
        it over and still emitting: the marker is its signal to stop. Unless this member's
        probe was acknowledged long enough ago for that owner to have stopped and its output
        to have landed or expired (:meth:`_unclean_wait`), the takeover waits until the release
        appears, at most that long. A release that lands above the marker, with nothing else
        after the marker, ends it: the marks read up to the release are complete, and the
        takeover starts under this marker. Otherwise it marks the end again, so that it starts
        after the old owner's last record. See the module docstring for the other waits.

        Without fencing the marker was usually written in the grace period already (an early
        marker: :meth:`_from_early_markers`), and in a planned move the old owner's release
        lies above it by now: the takeover starts at once, with no marker to write.

        ``induced``: partitions taken over on suspicion (:mod:`.detector`), which NELI does not
        give this member: they are not given up for not being led.
        """
        early = self._from_early_markers(partitions)
        snaps = self._mark_ends([p for p in partitions if p not in early], deferred)
        snaps.update(early)
        self._defer_late_terms(partitions, snaps, deferred)
        for p in sorted(early):
            from_release = None if p in deferred else self._standby.released_above(p, snaps[p])
            if from_release is not None:
                snaps[p] = from_release
                del early[p]
        # The latest term is this member's own, ended: nothing to guess (.own_terms). Settled
        # before the marker, it is as good as released; otherwise wait until it has settled
        # and mark again (its records may have landed above the marker).
        own = {p for p, snap in snaps.items() if self._own.ended(p, snap)}
        settled = {p for p in own if self._own.settled(p, snaps[p], self._marked_at[p])}
        waits = {
            p: wait
            for p, snap in snaps.items()
            # Fenced: the previous owner's producer can no longer append, nothing to wait for.
            if not snap.clean and not self._control.fencing and not self._grace.waived(p)
            # An early marker not released above always ends in a marker written now: the old
            # owner may have emitted above the early one before it saw it.
            if p not in deferred
            and p not in settled
            and ((wait := self._unclean_wait(p, snap)) > 0 or p in early or p in own)
        }
        unclean = sorted(waits)
        now = time.monotonic()
        probe_age = {
            p: round(now - acked, 2) for p, acked in self._grace.take_acked(partitions).items()
        }
        if unclean:
            # The previous owner may be handing over: it stops within HANDOVER_FRESH_S of
            # seeing our marker, then releases. Wait for that, then mark the end again.
            marks = {p: snaps[p].offset for p in unclean}
            log.info(
                "partitions %s not released: waiting up to %s s for a previous owner still "
                "handing over, or for its output to land or expire (probes acknowledged %s s "
                "ago)",
                unclean,
                {p: round(w, 2) for p, w in waits.items()},
                {p: probe_age.get(p) for p in unclean},
            )
            # Revoked meanwhile: stop waiting (the rebalance waits for this thread).
            self._standby.wait_clean(
                marks,
                max(waits.values()),
                give_up=lambda: not any(self._neli.leads(p) for p in unclean),
                terms={p: snaps[p].term for p in unclean if snaps[p].term >= 0},
            )
            # Where the old owner's release landed above our marker and nothing else since,
            # the marks read up to it are complete: start under this marker. Elsewhere (no
            # release in time, or another member's request or term meanwhile) mark again.
            released = {
                p: snap
                for p in unclean
                if (snap := self._standby.released_above(p, snaps[p])) is not None
            }
            snaps.update(released)
            if released:
                log.info(
                    "partitions %s released above the takeover marker: taken from the release",
                    sorted(released),
                )
            again = [p for p in unclean if p not in released]
            if again:
                snaps.update(self._mark_again(again, snaps, deferred))
        ready = []
        for partition, snap in sorted(snaps.items()):
            if partition in deferred:
                continue
            if partition not in induced and not self._neli.leads(partition):
                # Revoked while taking it up: this term ends before it began.
                deferred[partition] = self._end_unbegun(
                    partition, snap, "no longer led when the takeover was ready", 0.05
                )
                continue
            if self._grace.waived(partition):
                self._grace.drop_waiver(partition)
                if not snap.clean and not self._control.fencing:
                    # Another term started between the probe and this marker: the grace
                    # period was not to be skipped after all. Wait it out, then start over.
                    deferred[partition] = TakeoverDeferredError(
                        "another owner appeared after the clean release",
                        retry_after_s=self._threshold_s,
                    )
                    continue
            ready.append((partition, snap))
        return ready

    def _from_early_markers(self, partitions: list[int]) -> dict[int, Snapshot]:
        """The partitions whose takeover goes on under this member's early marker (written in
        its grace period: :mod:`.grace_period`), each with the state just below the marker.

        An early marker stands for one written now if it is still the latest term on
        ``prices[k]`` (and, if the partition was released below it, no price has followed
        it): the checks below run on the state just below it as on a new marker's. Where the
        previous owner's release lies above it (a planned move) the takeover starts at once
        from the marks read up to the release (:meth:`~.standby.StandbyTail.released_above`);
        where not, the waits run on it and a new marker follows them, since that owner may
        have emitted above the early marker before it saw it. Otherwise (another member's
        term since, a price after a clean release, or the tail never saw it) the takeover
        writes a new marker at once; the early one stays below it as a term this member
        never began, and the checks see the other term.
        """
        found: dict[int, Snapshot] = {}
        for partition, (offset, seen, asked) in self._grace.take_early(partitions).items():
            self._note_own(partition, offset)
            self._marked_at[partition] = asked
            mark = seen or self._standby.snapshot_at(partition, offset, _CATCH_UP_S)
            if mark is None or self._standby.latest_term(partition) != offset:
                continue
            if mark.clean and self._standby.released_above(partition, mark) is None:
                continue  # a price (or another member's request) after a clean marker
            found[partition] = mark
        return found

    def _defer_late_terms(
        self,
        partitions: list[int],
        snaps: dict[int, Snapshot],
        deferred: dict[int, TakeoverDeferredError],
    ) -> None:
        """Defer the takeovers whose marker finds a term another member began after this
        member asked for the partition (its probe, or where its tail was when it first saw
        the partition in its grace period), or after NELI assigned it the partition (by the
        marker's timestamp, within the clock skew e). Without fencing only.

        One of the two may be a zombie (its loss not yet noticed), and the other's term may
        have begun on a clean release that this member's probe did not count. Do not start a
        second term beside it: end ours before it began (our marker stops a member handing
        over, nothing more), wait a grace period and look again. Found by the relay simulation
        (three times: once with a probe, once for a member a stall had kept from probing, and
        once for a member whose worker did not run at all in its grace period, so it had
        noted nothing: the assignment time is the one record that cannot be missed).

        Once only per such term: the retry, a grace period later, finds a zombie fenced by
        then, and takes the partition over with the usual waits for that term's output. (The
        release of this member's marker makes that term the latest again; deferring on it
        each time left a partition whose other owner never released it deferred for good,
        the relay simulation again.)
        """
        probed = self._grace.take_asked(partitions)
        for p, snap in snaps.items():
            if snap.clean or self._control.fencing or self._deferred_for.get(p) == snap.term:
                continue
            if snap.term > probed.get(p, snap.term) or self._term_after_assignment(p, snap):
                self._deferred_for[p] = snap.term
                deferred[p] = self._end_unbegun(
                    p,
                    snap,
                    "another member started a term after this member asked for the partition",
                    retry_after_s=self._threshold_s,
                )

    def _term_after_assignment(self, partition: int, snap: Snapshot) -> bool:
        """Whether the latest term below ``snap`` is another member's, begun (its marker
        produced) after NELI assigned ``partition`` to this member, less the clock skew e; an
        unknown timestamp counts as after. A term of this member's own (a resume) does not."""
        if snap.term < 0 or snap.term in self._own_markers.get(partition, ()):
            return False
        since = self._neli.assigned_since(partition)
        if since is None:
            return False  # not assigned: not led either, the takeover ends anyway
        return snap.term_wall < 0 or snap.term_wall >= since - self._skew_s

    def _unclean_wait(self, partition: int, snap: Snapshot) -> float:
        """How long a takeover whose marker found ``partition`` not released waits for the
        release before it marks the end again (0: not at all). Without fencing only.

        * The latest term is this member's own, ended (:mod:`.own_terms`): until everything
          it produced there has landed or expired, which it knows first-hand (no release
          will come: it would be its own).
        * The latest term's owner announced a hand-over below the marker: it emits until it
          sees this member's request (the probe, else this marker), within
          ``HANDOVER_FRESH_S`` of its acknowledgement, and what it produced until then lands
          or expires within ``output_timeout_ms`` of being produced, plus up to a second
          (librdkafka looks for timed-out records once a second). Wait until all that has
          passed since the request. Its release normally ends the wait much sooner; one that
          does not come (its output failed, it crashed mid hand-over, its flush is slow on a
          loaded broker) no longer lets its late records land above the marks: the old wait,
          ``HANDOVER_FRESH_S`` + 0.2 s, covered its stopping but not its queued output.
        * Nothing is known of when it last led: it may be handing over. Wait
          ``HANDOVER_FRESH_S`` (plus margin) after this member's probe, unless the probe was
          acknowledged longer ago than that (it stopped then).
        * No announcement below the marker: the owner will not emit on k again (its tail reads
          the marker before its own announcement, and it emits in a hand-over only once it
          has read that back). What it produced while it still led may be in flight. It led
          at most T after its last heartbeat, which NELI says was sent ``silent`` ago (within
          e), and its output expires ``output_timeout_ms`` after it was produced
          (``message.timeout.ms``): wait until T + e + that have passed since the heartbeat.
          After a crash that has passed by the time the successor is assigned, instead of a
          whole grace period.
        """
        if self._own.ended(partition, snap):
            return self._own.settles_in(partition)  # its own output: known first-hand
        now = time.monotonic()
        if snap.handing_over:
            return max(0.0, self._grace.acked_at(partition, now) + self._drained_s - now)
        silent = self._neli.previous_holder_silent_s(partition)
        if silent is not None:
            return max(0.0, self._output_expired_s - silent)
        fresh = HANDOVER_FRESH_S + _MARGIN_S
        asked = now - fresh
        return fresh if self._grace.acked_at(partition, asked) >= asked else 0.0

    def _end_unbegun(
        self, partition: int, snap: Snapshot, why: str, retry_after_s: float
    ) -> TakeoverDeferredError:
        """End the term of the takeover marker ``snap`` was captured at before it began.

        The release says so, so that whoever is next need not wait out a grace period for
        it; but if an earlier term was still open below the marker, it says that too
        (``before`` = ``unclean``): that term's owner may still be emitting (it may be the
        member that took the partition from us), and a release of ours must not make the
        partition look released. Returns the deferral to record.
        """
        self._control.write_markers(
            [partition],
            RELEASE,
            MARKER_TIMEOUT_S,
            terms={partition: snap.offset},
            unclean=() if snap.clean else (partition,),
            below={partition: (snap.term, snap.term_wall)},
        )
        self._grace.drop_waiver(partition)
        return TakeoverDeferredError(why, retry_after_s=retry_after_s)

    def _mark_again(
        self,
        partitions: list[int],
        first: dict[int, Snapshot],
        deferred: dict[int, TakeoverDeferredError],
    ) -> dict[int, Snapshot]:
        """Mark the end again after the waits: new markers, and the state just below each.

        The latest term below a new marker is then this member's first marker, a term that
        never began; each snapshot names the term below *that* one instead (the previous
        owner's, and whether it was handing over), so that a release of this term, should it
        end before it began, makes that term the latest again and hides nothing
        (:meth:`_end_unbegun`).
        """
        marked = self._mark_ends(partitions, deferred)
        for p, snap in marked.items():
            below = first[p]
            if snap.term == below.offset:
                marked[p] = dataclasses.replace(
                    snap,
                    term=below.term,
                    term_wall=below.term_wall,
                    handing_over=below.handing_over,
                )
        return marked

    def _note_own(self, partition: int, offset: int) -> None:
        """Remember a takeover marker of this member's own on ``partition``."""
        self._own_markers.setdefault(partition, deque(maxlen=_OWN_MARKERS_KEPT)).append(offset)

    def _mark_ends(
        self, partitions: list[int], deferred: dict[int, TakeoverDeferredError]
    ) -> dict[int, Snapshot]:
        """Write takeover markers and take the standby's state just before each one.

        Partitions whose marker was not acknowledged, or not reached by the tail in time, go
        to ``deferred`` (and are left out of the result).
        """
        marked_at = time.monotonic()
        ends = self._control.write_markers(partitions, TAKEOVER, timeout_s=MARKER_TIMEOUT_S)
        for partition, offset in ends.items():
            self._note_own(partition, offset)
            self._marked_at[partition] = marked_at
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
