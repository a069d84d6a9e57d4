"""Hooks for an application that hands partitions over between members: :class:`Takeover`.

A plain NELI user asks :meth:`neli.Neli.leads` before each act and reacts to events; that is
the whole contract. An application that moves *state* with a partition (pricing-ha's relay:
an output log whose producer must be fenced before a successor writes) needs a few more
answers about the moment of succession. They are gathered here, reached as
:attr:`neli.Neli.takeover` (and :attr:`neli.testing.FakeNeli.takeover` in tests), so that the
member's own surface stays what a goNELI user expects.

The grace period
----------------
In exclusive mode a partition newly assigned to a member is not led for T (the grace period):
an earlier holder may still be acting, because it has not noticed yet that it lost the
partition. :meth:`Takeover.in_grace` lists the partitions in that state.

Ending it early (:meth:`Takeover.end_grace`) is safe only with *proof* that no predecessor can
still act: for example a release record the previous holder wrote after its last act, found
at the end of a totally ordered log this member has just read to its end, with nothing after
it. The exclusivity guarantee then rests on that proof, not on T. Leadership still needs this
member's own fresh heartbeat (and no stall), as always.

The fast variant also ends a grace period by itself on evidence: once the member's own first
heartbeat on the partition has returned, if the previous holder's last heartbeat read before
it was sent more than T + e ago (after a crash: about S plus the rebalance); and a holder that
reads a later term of another member on its partition stops leading it (until the group
disproves that take-over, 2 S + 1 s later: see :mod:`neli._tracker`). Both need wall clocks
within e. In fast exclusive mode a member commits the position of its own latest heartbeat on
each partition, so the next holder always reads it.

When each hook is safe to act on
--------------------------------
* :meth:`~Takeover.in_grace`, :meth:`~Takeover.assigned_since`: facts about this member's
  assignment now; safe to read at any time, stale as soon as returned (like ``leads``).
* :meth:`~Takeover.end_grace`: only with the proof above in hand. Without it, two members
  may act on the partition at once.
* :meth:`~Takeover.previous_holder_silent_s`: good to within the clock skew e; use it to wait
  until the previous holder's output has landed or expired, never as proof it has stopped.
* :meth:`~Takeover.recovering`: wait for it to be ``False`` before announcing this member to a
  partition's previous holder (a probe, a hand-over request): a recovering member cannot act
  on the partition before then.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Takeover"]


@runtime_checkable
class Takeover(Protocol):
    """The hand-over and early-grace hooks of one member (see the module docstring).

    Implemented by :attr:`neli.Neli.takeover` and :attr:`neli.testing.FakeNeli.takeover`;
    an application's own fakes conform to it (mypy checks them structurally).
    """

    def in_grace(self) -> frozenset[int]:
        """Exclusive mode: partitions assigned to this member and still in their grace period."""
        ...

    def end_grace(self, partition: int) -> bool:
        """Exclusive mode: end ``partition``'s grace period now; returns whether one was running.

        Call this only with proof that no earlier holder can still act (see "Ending it early"
        in :mod:`neli.takeover`). The real member then pulses at once, to prove its ownership
        without waiting for the next pulse.
        """
        ...

    def assigned_since(self, partition: int) -> float | None:
        """Fast variant: the wall time at which ``partition`` was (last) assigned to this
        member (the ``since`` its heartbeats carry), or ``None`` if it is not assigned.

        For example, to tell whether another member's act came after this member's term began.
        """
        ...

    def previous_holder_silent_s(self, partition: int) -> float | None:
        """Fast variant, exclusive mode: seconds since the previous holder of ``partition``
        (assigned to this member) sent its last heartbeat, or ``None`` if that is not known.

        Known once this member's own first heartbeat on the partition has come back, if the
        latest heartbeat of another member of the group read there before it named the
        partition as led. The previous holder stopped leading at most T after that heartbeat
        was sent, so anything it produced while leading was produced no later; an application
        whose output expires after a known time can tell when all of it has landed or expired.
        Measured against the heartbeat's timestamp, so good to within the clock skew e.
        """
        ...

    def recovering(self) -> bool:
        """Exclusive mode: whether a stall holds this member off leading anything now.

        True while this process is stalled (its watchdog has not ticked within
        ``stall_limit_ms``) and, after a stall, until S + 0.5 s (at least T) have passed: its
        consumer may still believe in a session the group has already ended.

        After :meth:`neli.Neli.close` the watchdog has stopped: each call then stands in for
        its tick, so a caller that goes on asking at least every ``stall_limit_ms`` (a relay
        finishing a hand-over after close) keeps the guard working.
        """
        ...
