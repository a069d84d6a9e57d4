"""Leadership change events and the barrier protocol.

Transition table for one partition of one member (``assigned`` means the consumer group gave
this member the partition; ``fresh`` means the protocol's freshness test passes right now)::

    state      event       next       when
    ---------  ----------  ---------  ------------------------------------------------------
    follower   ACQUIRED    leader     assigned and fresh (after the grace period, if any)
    leader     FENCED      fenced     still assigned but no longer fresh (heartbeats stopped
                                      coming back within T, or this process stalled)
    fenced     RESUMED     leader     fresh again while still assigned
    leader     REVOKED     follower   the group took the partition away (rebalance, lost
    fenced     REVOKED     follower   session, or close())

Barrier handlers receive every event, in order, one at a time. Guarantees:

* REVOKED is delivered from inside the rebalance: the group does not move on until every handler
  returns (bounded by ``barrier_timeout_ms``), so in-flight work can finish first. By the time it
  is delivered :meth:`Neli.is_leader` already answers ``False`` for the partition.
* FENCED is delivered as soon as the periodic check notices; leadership was already gone when
  the freshness test failed, so a handler must stop work at once, not finish it.
* ACQUIRED / RESUMED are delivered after :meth:`Neli.is_leader` starts answering ``True``.

Handlers must not rely on an event to decide whether they may act: they must ask
:meth:`Neli.is_leader` at the moment of acting (leadership can end between two events).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol


class EventKind(enum.Enum):
    """What happened to this member's leadership of one partition."""

    ACQUIRED = "acquired"
    REVOKED = "revoked"
    FENCED = "fenced"
    RESUMED = "resumed"

    @property
    def gains(self) -> bool:
        """True for the kinds after which this member leads the partition."""
        return self in (EventKind.ACQUIRED, EventKind.RESUMED)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeadershipEvent:
    """One leadership transition of one member for one partition.

    Attributes:
        kind: the transition.
        partition: the NELI partition.
        group: the member's consumer group.
        member_id: the member (unique per process start).
        member_name: the human-readable member name.
        reason: why, in words (``"assigned"``, ``"heartbeat timeout"``, ``"rebalance"``, ...).
        at_mono: monotonic time of the transition (seconds).
        at_wall: wall time of the transition (seconds since the epoch).
        term_started_wall: for losses, when the term that ended began (wall seconds).
        predecessor: for gains, meta that the previous leader of this partition published in
            its heartbeats (for example a trace context), when known.
    """

    kind: EventKind
    partition: int
    group: str
    member_id: str
    member_name: str
    reason: str
    at_mono: float
    at_wall: float
    term_started_wall: float | None = None
    predecessor: dict[str, str] | None = None


class BarrierHandler(Protocol):
    """Called once per leadership event, in order, one event at a time; sync or async.

    What a handler may rely on is the module's guarantee list above; in short:

    * REVOKED: delivered inside the rebalance, which waits for every handler to return (up to
      ``barrier_timeout_ms``). Finish or abandon in-flight work for the partition *before*
      returning: after the return another member may be assigned it.
    * FENCED: leadership is already gone; stop at once, do not finish work.
    * ACQUIRED / RESUMED: :meth:`Neli.leads` already answers ``True``; still ask it before
      acting, since leadership can end between two events.

    A handler that raises is logged and does not stop the others (nor the rebalance).
    """

    def __call__(self, event: LeadershipEvent, /) -> Awaitable[None] | None:
        """Handle ``event``; an awaitable result is awaited before the next event."""
