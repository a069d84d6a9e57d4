"""The relay's partition lifecycles in the simulation: the code takes partitions along the
drawn transitions, all of them, and a planned move along the path docs/relay.md describes."""

from __future__ import annotations

import pytest

from pricing_ha.dedupe.lifecycle import TRANSITIONS, PartitionLifecycle, PartitionState
from tests.sim.relay.hand_driven import a_takes_partition_0, relay_for, two_members
from tests.sim.relay.relay_checker import Checker
from tests.sim.relay.relay_clock import simulated_time
from tests.sim.relay.relay_schedule import run
from tests.sim.relay.relay_steps import random_steps

S = PartitionState
Move = tuple[int, PartitionState, PartitionState]  # (id of the lifecycle, from, to)


@pytest.fixture
def moves(monkeypatch: pytest.MonkeyPatch) -> list[Move]:
    """Every transition any lifecycle takes during the test, in order."""
    taken: list[Move] = []
    move = PartitionLifecycle.move

    def recording(self: PartitionLifecycle, target: PartitionState) -> None:
        source = self.state
        move(self, target)
        taken.append((id(self), source, target))

    monkeypatch.setattr(PartitionLifecycle, "move", recording)
    return taken


def _path(moves: list[Move], lc: PartitionLifecycle) -> list[PartitionState]:
    mine = [(a, b) for who, a, b in moves if who == id(lc)]
    return [mine[0][0], *(b for _, b in mine)] if mine else [lc.state]


def test_a_planned_move_takes_both_members_along_the_drawn_path(moves: list[Move]) -> None:
    """A hands partition 0 over (OWNING, HANDING_OVER, STANDBY); B probes, takes it over
    and owns it (STANDBY, PROBING, TAKING_OVER, OWNING) under a later term."""
    world, workers, raw = two_members(evidence_share=0.0)
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        term = a.lifecycles[0].term
        assert a.lifecycles[0].state is S.OWNING
        assert term is not None
        del moves[:]
        world.move(0, "B", planned=True, zombie_s=0.0)
        relay_for(world, workers, raw, "AB", 2.0)
    assert _path(moves, a.lifecycles[0]) == [S.OWNING, S.HANDING_OVER, S.STANDBY]
    assert _path(moves, b.lifecycles[0]) == [S.STANDBY, S.PROBING, S.TAKING_OVER, S.OWNING]
    assert a.lifecycles[0].term is None
    assert (b.lifecycles[0].term or -1) > term
    assert 0 in b.active
    assert 0 not in a.active
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


def test_random_fail_overs_take_every_drawn_transition_and_no_other(moves: list[Move]) -> None:
    """Over random schedules (with and without the detector) every transition of the table
    is taken, none is refused, and prices stays exactly once."""
    for seed in range(24):
        detector = seed % 2 == 1
        outcome = run(seed, random_steps(seed, detector=detector), detector=detector)
        assert not outcome.failed, f"seed {seed}: {outcome.violations or outcome.stuck}"
    drawn = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    taken = {(a, b) for _, a, b in moves}
    assert taken <= drawn
    assert drawn - taken == set(), (
        f"never taken: {sorted((a.name, b.name) for a, b in drawn - taken)}"
    )
