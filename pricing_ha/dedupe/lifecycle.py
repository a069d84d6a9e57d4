"""One object per partition of ``prices``: where this relay member stands on it, and why.

Every relay member tails every partition of ``prices`` (:mod:`.standby`); a few of them it
also owns. :class:`PartitionLifecycle` holds, for one partition, this member's
:class:`PartitionState` and the per-partition facts the phases keep about it (its term, its
grace period's probe, its hand-over's clock). :class:`~.relay_worker.RelayWorker` holds one
per partition in a single ``dict[int, PartitionLifecycle]`` and shares it with the phases
that move partitions: :mod:`.grace_period`, :mod:`.suspicion`, :mod:`.succession` (through
the worker's ``assign_many``) and :mod:`.handover`.

The states (drawn in ``docs/relay.md``, whose diagram a test checks against
:data:`TRANSITIONS`)::

    STANDBY       tailed only: somebody else owns it, or nobody yet
    PROBING       assigned by the group and in its grace period: a probe ("I am next") is on
                  prices[k], waiting for the owner's release or 0.3 s (.grace_period)
    SUSPECTING    the detector found it quiet with this member as its successor (.suspicion)
    TAKING_OVER   fencing the previous owner, takeover marker, marks (.succession)
    OWNING        emitting under this member's term (the offset of its takeover marker)
    HANDING_OVER  revoked, fenced, or held after a takeover on suspicion: still emitting
                  under its term until the successor asks (.handover)

A takeover that cannot be established yet (deferred) goes back to STANDBY and is retried
from there. A partition given back to this member while it hands it over goes on under its
old term (HANDING_OVER -> OWNING) when nobody else took a term since. Letting go (flush, then
a release marker unless its output failed) returns to STANDBY from OWNING or HANDING_OVER.

Transitions are checked in one place, :meth:`PartitionLifecycle.move`: one not in
:data:`TRANSITIONS` raises :class:`LifecycleError` naming the partition and both states.
The model is Kafka Streams' ``Task.State`` with ``isValidTransition``; ``neli/_slot.py`` does
the same for NELI's view of a partition.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

from pricing_ha.errors import PricingError

__all__ = [
    "INITIAL",
    "TRANSITIONS",
    "LifecycleError",
    "PartitionLifecycle",
    "PartitionState",
    "lifecycles",
]

log = logging.getLogger("pricing_ha.relay")


class PartitionState(enum.Enum):
    """Where this relay member stands on one partition of ``prices`` (module docstring)."""

    STANDBY = "standby"
    PROBING = "probing"
    SUSPECTING = "suspecting"
    TAKING_OVER = "taking_over"
    OWNING = "owning"
    HANDING_OVER = "handing_over"


_S = PartitionState

#: The state every partition starts in.
INITIAL = _S.STANDBY

#: Every legal transition: state -> the states it may move to. ``docs/relay.md`` draws it.
TRANSITIONS: Mapping[PartitionState, frozenset[PartitionState]] = {
    # a probe in the grace period; the detector's suspicion; the group's assignment
    _S.STANDBY: frozenset({_S.PROBING, _S.SUSPECTING, _S.TAKING_OVER}),
    # the grace period ended: released, or 0.3 s without a release (the takeover fences);
    # or the grace period is over without this member taking the partition up
    _S.PROBING: frozenset({_S.TAKING_OVER, _S.STANDBY}),
    _S.SUSPECTING: frozenset({_S.TAKING_OVER}),
    # established (fenced, marker acknowledged, marks taken); or deferred, retried later
    _S.TAKING_OVER: frozenset({_S.OWNING, _S.STANDBY}),
    # revoked, fenced, or held after a takeover on suspicion; or let go (released, dropped)
    _S.OWNING: frozenset({_S.HANDING_OVER, _S.STANDBY}),
    # given back with nobody's term since; or the successor asked, the bound passed, dropped
    _S.HANDING_OVER: frozenset({_S.OWNING, _S.STANDBY}),
}

#: The states in which this member holds a term on the partition (its takeover marker).
_WITH_TERM = frozenset({_S.OWNING, _S.HANDING_OVER})


class LifecycleError(PricingError):
    """A partition was moved between two states the lifecycle does not connect (a bug).

    Attributes:
        partition: the partition of ``prices``.
        source: the state it was in.
        target: the state it was to move to.
    """

    def __init__(self, partition: int, source: PartitionState, target: PartitionState) -> None:
        """Name the partition and both states."""
        allowed = ", ".join(sorted(s.name for s in TRANSITIONS[source])) or "nothing"
        super().__init__(
            f"partition {partition}: illegal transition {source.name} -> {target.name} "
            f"(from {source.name} only to {allowed})"
        )
        self.partition = partition
        self.source = source
        self.target = target


@dataclass(slots=True)
class PartitionLifecycle:
    """This member's state on one partition, and the facts its phases keep about it.

    The fields other than :attr:`state` belong to one phase each; each is set and cleared by
    that phase (a probe outlives its PROBING state until the grace period is over, as NELI
    says: the phase, not the state, owns it).
    """

    partition: int
    state: PartitionState = INITIAL
    #: OWNING, HANDING_OVER: offset of this member's takeover marker on ``prices[k]``.
    term: int | None = None
    #: Grace period (:mod:`.grace_period`): offset of this member's probe, when acknowledged.
    probe: tuple[int, float] | None = None
    #: Assigned with no grace period left while another member still emits on it
    #: (:meth:`.grace_period.GracePeriods.hold_for_release`): offset of this member's probe
    #: asking that owner to release it, when acknowledged.
    asked: tuple[int, float] | None = None
    #: Hand-over (:mod:`.handover`): since when, until when it may go on if nobody asks
    #: (monotonic), when a stale tail was last ticked, since when it was given back.
    handover_began: float | None = None
    handover_until: float | None = None
    handover_ticked: float = -math.inf
    given_back: float | None = None
    #: Suspicion (:mod:`.suspicion`): when this member last pulsed it (monotonic).
    pulsed: float = -math.inf
    #: Taken up as its grace period ended (:mod:`.relay_worker`): NELI's assignment time then,
    #: and how many of NELI's events had arrived; and the count at its latest NELI event.
    taken_early: tuple[float | None, int] | None = None
    last_event: int = -1

    def move(self, target: PartitionState) -> None:
        """Move to ``target``; raises :class:`LifecycleError` if :data:`TRANSITIONS` has no
        such transition. Leaving the states with a term forgets the term."""
        if target not in TRANSITIONS[self.state]:
            raise LifecycleError(self.partition, self.state, target)
        log.debug("partition %d: %s -> %s", self.partition, self.state.name, target.name)
        self.state = target
        if target not in _WITH_TERM:
            self.term = None

    def own(self, term: int) -> None:
        """TAKING_OVER -> OWNING under ``term`` (the offset of the takeover marker)."""
        self.move(_S.OWNING)
        self.term = term

    @property
    def owned(self) -> bool:
        """Whether this member holds a term on the partition (OWNING or HANDING_OVER)."""
        return self.state in _WITH_TERM

    @property
    def handing_over(self) -> bool:
        """Whether the partition is being handed over."""
        return self.state is _S.HANDING_OVER


def lifecycles(partitions: int) -> dict[int, PartitionLifecycle]:
    """One lifecycle per partition of ``prices``, each in :data:`INITIAL`."""
    return {p: PartitionLifecycle(p) for p in range(partitions)}
