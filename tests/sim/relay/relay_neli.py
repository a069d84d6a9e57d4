"""The relay simulation's NELI: one member's view of the simulated group.

:class:`SimNeli` answers ``leads``/``in_grace``/``end_grace`` (the relay's
``LeadershipSource``) from the simulated group (:class:`World`'s coordinator state), which
follows the NELI rules the relay relies on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.relay.relay_world import World


class SimNeli:
    """One member's view of the simulated group (the relay's ``LeadershipSource``)."""

    def __init__(self, world: World, name: str) -> None:
        """Member ``name`` of ``world``'s group."""
        self._world = world
        self._name = name

    def leads(self, partition: int) -> bool:
        """Whether this member leads ``partition`` now (see :meth:`World.leads`)."""
        return self._world.leads(self._name, partition)

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
