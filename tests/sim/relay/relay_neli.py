"""The relay simulation's NELI: one member's view of the simulated group.

:class:`SimNeli` is the relay's ``LeadershipSource``: ``leads`` and, as ``takeover``, a
:class:`SimTakeover` (the :class:`neli.takeover.Takeover` hooks: ``in_grace``, ``end_grace``,
``recovering``, ``assigned_since``, ``previous_holder_silent_s``), all answered from the
simulated group (:class:`World`'s coordinator state), which follows the NELI rules the relay
relies on. mypy checks both against the protocols they stand in for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neli.takeover import Takeover
    from pricing_ha.dedupe.succession import LeadershipSource
    from tests.sim.relay.relay_world import World


class SimTakeover:
    """One member's hand-over hooks (:class:`neli.takeover.Takeover`) in the simulated group."""

    def __init__(self, world: World, name: str) -> None:
        """Member ``name`` of ``world``'s group."""
        self._world = world
        self._name = name

    def in_grace(self) -> frozenset[int]:
        """Partitions assigned to this member and still in their grace period."""
        w = self._world
        return frozenset(
            p
            for p, own in w.owner.items()
            if own == self._name and w.clock.now < w.grace_until.get(p, 0.0)
        )

    def recovering(self) -> bool:
        """Whether a stall holds this member off (until ``World.stalled_until``)."""
        return self._world.clock.now < self._world.stalled_until.get(self._name, 0.0)

    def assigned_since(self, partition: int) -> float | None:
        """When ``partition`` was last assigned to this member (simulated wall time): also
        while fenced, or a zombie there (its NELI has not noticed the move); ``None`` once
        it is not assigned, as NELI says."""
        world = self._world
        if (
            world.owner.get(partition) != self._name
            and (self._name, partition) not in world.zombies
        ):
            return None
        return world.assigned_at.get((self._name, partition))

    def previous_holder_silent_s(self, partition: int) -> float | None:
        """Not simulated (the relay does not ask): unknown, as NELI's full variant answers."""
        del partition
        return None

    def end_grace(self, partition: int) -> bool:
        """End the grace period now (the relay has proof nobody else can append)."""
        w = self._world
        if partition not in self.in_grace():
            return False
        w.grace_until[partition] = w.clock.now
        w.note(f"{self._name} ends grace of {partition}")
        # As NELI does: leads() answers True at once; ACQUIRED follows at its next evaluation
        # (the world's next tick), and until then a revocation reports nothing.
        return True


class SimNeli:
    """One member's view of the simulated group (the relay's ``LeadershipSource``)."""

    def __init__(self, world: World, name: str) -> None:
        """Member ``name`` of ``world``'s group."""
        self._world = world
        self._name = name
        self._takeover = SimTakeover(world, name)

    def leads(self, partition: int) -> bool:
        """Whether this member leads ``partition`` now (see :meth:`World.leads`)."""
        return self._world.leads(self._name, partition)

    @property
    def takeover(self) -> SimTakeover:
        """The hand-over hooks, from the same simulated group."""
        return self._takeover


if TYPE_CHECKING:  # mypy: the fakes conform to the protocols they stand in for
    _hooks: type[Takeover] = SimTakeover
    _source: type[LeadershipSource] = SimNeli
