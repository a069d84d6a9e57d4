"""A partition being handed over whose output failed: started over in place, same term.

A relay member that owns ``prices[k]`` and finds some of its output to k unacknowledged (a
record timed out, a producer replaced) cannot go on from the arbiter's marks: a record that
failed may be missing from ``prices[k]``. While it leads k it drops the partition and takes it
up again (a takeover marker, the standby's marks, ``prices.raw[k]`` from the last commit),
once the replaced producer's broker answers (without fencing): a broker stall times the
output out a moment before NELI notices its own heartbeat late, and a partition dropped at
once was fenced before it could be taken up again, then silent until the re-formed group's
owner had waited out a grace period. Kept until the broker answers, it is handed over
instead, and started over in place as below.

A member *handing k over* cannot take it up again: NELI no longer gives it k, so that would be
a new term beside its successor's. Before, it dropped k, and k stayed silent until the
successor took it up. A broker stall longer than the relays' session timeout does exactly
that to every relay at once: the stall times out the records in flight (``message.timeout.ms``
is at most S), the sessions are lost, and the group re-forms only once every member has
rejoined: the partitions that had records in flight stayed silent until then, and until the
takeovers that followed; the others did not.

So such a partition starts over **in place, under the same term**: once the replaced
producer's broker answers, the member writes its hand-over announcement again, with a marker
of its own, to ``prices[k]`` (its acknowledgement fixes the end of ``prices[k]`` by offset, as
a takeover marker does; and the first announcement may have been lost in the failure), takes
the standby's marks just below it (:meth:`~.standby.StandbyTail.snapshot_at`), and
re-reads ``prices.raw[k]`` from its last commit. It keeps its term and the hand-over's rule
(:mod:`.handover`): it emits only while no successor has asked since that term, and the
successor's wait for a release that does not come is unchanged (a member whose output failed
writes no release). It goes on only if no other member began a term or asked for k.

Without fencing only (announcements are). With fencing the partition's transactional
producer would keep its epoch through the marker, so a record of the failed transaction still
in flight could land after it; a takeover's ``init_transactions`` is what fences that, and a
member handing over does not take one (it drops k, as before).

The window this leaves, the same as a takeover's after a failure of the member's own output
without fencing: a record reported timed out but still in flight past the marker (documented in
``docs/architecture.md`` §8).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping

from pricing_ha.dedupe.control import HANDOVER
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.standby import StandbyTail

__all__ = ["Restarts"]

log = logging.getLogger("pricing_ha.relay")

_MARKER_TIMEOUT_S = 2.0  # the marker's acknowledgement
_CATCH_UP_S = 1.0  # the standby tail reaching the marker (else: tried again)
_RETRY_S = 0.2  # between attempts
_EVENT_WAIT_S = 1.0  # a failed partition no longer led waits this long for its hand-over


class Restarts:
    """The partitions whose output failed while being handed over, until started over.

    Args:
        standby: this member's tail of ``prices``.
        control: writes the member's markers.
        terms: the member's terms, partition -> offset of its takeover marker (shared).
        handing_over: whether a partition is being handed over now.
        leads: whether NELI gives this member a partition now.
        drop: ends a partition's work (no release is written while it is in here).
        resume: starts a partition over from marks: rebuild the arbiter from the marks,
            re-read ``prices.raw[k]`` from the last commit; False if that is not possible now.
        may_resume: whether a replaced producer's broker has answered
            (:meth:`.output_producers.OutputProducers.may_resume`).
    """

    def __init__(
        self,
        standby: StandbyTail,
        control: ControlWriter,
        *,
        terms: Mapping[int, int],
        handing_over: Callable[[int], bool],
        leads: Callable[[int], bool],
        drop: Callable[[int], None],
        resume: Callable[[int, dict[str, int], int], bool],
        may_resume: Callable[[], bool],
    ) -> None:
        """Nothing is being started over yet."""
        self._standby = standby
        self._control = control
        self._terms = terms
        self._handing_over = handing_over
        self._leads = leads
        self._drop = drop
        self._resume = resume
        self._may_resume = may_resume
        self._since: dict[int, float] = {}  # failed: since (monotonic)
        self._next_try: dict[int, float] = {}
        # Failed while led: taken up afresh once the broker answers, unless a fence or a lost
        # session makes it a hand-over first (then started over in place, as above).
        self._led: set[int] = set()

    def __contains__(self, partition: object) -> bool:
        return partition in self._since

    def failed(self, partitions: Collection[int]) -> list[int]:
        """Output to ``partitions`` failed: those to start over in place, and (without fencing)
        those still led, to take up afresh once the broker answers unless a hand-over comes
        first, are kept here (not emitted on until then); returns the others, dropped now."""
        drop = []
        for partition in sorted(partitions):
            if partition in self._since:
                continue
            if self._control.fencing or partition not in self._terms:
                drop.append(partition)
                continue
            self._since[partition] = time.monotonic()
            # A partition not led and not yet handed over: its hand-over may be a command the
            # worker has not applied yet (the barrier did not wait: a fence or a lost session
            # arrived while the worker was waiting for this very output).
            if self._handing_over(partition) or not self._leads(partition):
                log.info(
                    "partition %d: output failed while handing over: started over in place "
                    "(same term) once the broker answers",
                    partition,
                )
            else:
                # Still led: taken up afresh only once the broker answers, so that a fence
                # coming first makes it a hand-over (see the module docstring).
                log.info(
                    "partition %d: output failed while led: nothing emitted on it until the "
                    "broker answers, then taken up afresh (or, fenced meanwhile, handed over "
                    "and started over in place)",
                    partition,
                )
                self._led.add(partition)
        return drop

    def end(self, partition: int) -> bool:
        """``partition`` is dropped; whether it was waiting to start over (its output failed:
        no release may be written for it)."""
        self._next_try.pop(partition, None)
        self._led.discard(partition)
        return self._since.pop(partition, None) is not None

    def tend(self) -> None:
        """Start over what can be; drop what can no longer be handed over."""
        now = time.monotonic()
        for partition, since in list(self._since.items()):
            if partition not in self._terms:
                self.end(partition)
            elif partition in self._led and not self._handing_over(partition):
                if not self._leads(partition):
                    # Fenced or revoked meanwhile: its hand-over may be a command not yet
                    # applied; wait for it as for a partition that failed unled.
                    self._led.discard(partition)
                    self._since[partition] = now
                elif self._may_resume():
                    # Led throughout: taken up afresh, as before (released as before too).
                    self.end(partition)
                    self._drop(partition)
            elif not self._handing_over(partition):
                if self._leads(partition) or now - since > _EVENT_WAIT_S:
                    self._drop(partition)  # led again (taken up afresh), or no hand-over came
            elif now >= self._next_try.get(partition, 0.0) and self._may_resume():
                if self._start_over(partition):
                    self.end(partition)
                else:
                    self._next_try[partition] = time.monotonic() + _RETRY_S

    def _start_over(self, partition: int) -> bool:
        term = self._terms[partition]
        # The hand-over announcement again, with a marker: it fixes the end, and it stands
        # in for an announcement of the term that may itself have been lost in the failure
        # (a hand-over emits only once its tail has read its announcement back).
        ends = self._control.write_markers(
            [partition], HANDOVER, _MARKER_TIMEOUT_S, terms={partition: term}
        )
        if partition not in ends:
            return False
        snap = self._standby.snapshot_at(partition, ends[partition], _CATCH_UP_S)
        if snap is None:
            return False
        if snap.term != term or self._standby.requested_after(partition, term):
            return False  # the successor asked: the hand-over ends (HandOvers.tend)
        if not self._resume(partition, snap.high, snap.offset):
            return False
        log.info(
            "partition %d started over in place after %.2f s (marker at offset %d, term %d)",
            partition,
            time.monotonic() - self._since[partition],
            ends[partition],
            term,
        )
        return True
