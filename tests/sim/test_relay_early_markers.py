"""Early takeover markers, simulated step by step: without fencing, a successor's request in
its grace period is its takeover marker. A planned move starts under it; a partition NELI
revokes before reporting it acquired is let go; a partition that comes back on the member's
own ended term waits only for that member's own output. Each test drives one world
(:mod:`tests.sim.relay_schedule`) by hand and checks that ``prices`` stayed exactly once.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.hand_driven import (
    a_takes_partition_0,
    relay_for,
    takeover_markers,
    two_members,
)
from tests.sim.relay_clock import simulated_time
from tests.sim.relay_schedule import Checker, _turn, apply_step


def _planned_move_to_b(world: Any, workers: dict[str, Any], raw: Any) -> None:
    """A hands partition 0 over to B (planned), both turning, prices arriving; until B asks."""
    apply_step(world, workers, ("move", 0, "B", True, 0.0), raw)
    for _ in range(20):
        if workers["B"]._grace._probes:
            return
        relay_for(world, workers, raw, "AB", 0.05)
    raise AssertionError("B never asked for partition 0 in its grace period")


def test_a_planned_move_starts_under_the_marker_written_in_the_grace_period() -> None:
    """Without fencing the successor's request in its grace period is its takeover marker;
    the old owner stops on seeing it and releases above it, which ends the grace period, and
    the successor takes the partition up in that same turn, under that marker: no second
    marker, no wait for NELI's ACQUIRED event, exactly once."""
    world, workers, raw = two_members(seqs=200)
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        _planned_move_to_b(world, workers, raw)
        early = takeover_markers(world, 0, b._control._member)
        assert len(early) == 1, "the request in the grace period is not a takeover marker"
        for _ in range(40):
            apply_step(world, workers, ("advance", 0.01), raw)
            world.pump()
            _turn(world, a, 50)  # sees the marker: stops, flushes, releases
            world.pump()
            b.tend()  # no tick in between: ACQUIRED has not reached B's worker
            if 0 in b.active:
                break
        assert 0 in b.active, "the release did not end B's grace period and take-up"
        assert not world.acquired_sent.get(0), "taken up only after NELI's ACQUIRED"
        assert b._terms[0] == early[0], "the takeover did not start under the early marker"
        relay_for(world, workers, raw, "AB", 2.0)
        assert takeover_markers(world, 0, b._control._member) == early
        assert b.stats.relayed > 0
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


def test_a_partition_revoked_before_nelis_acquired_is_let_go() -> None:
    """B takes partition 0 up the moment its grace period ends, before NELI reports it
    ACQUIRED; the group then gives 0 back to A before that report, and NELI (which reports
    REVOKED only for what it reported ACQUIRED) says nothing to B. B must let go on its own
    (hand it over), or it would keep the partition forever and A's takeover would wait on
    it; A takes it up again and ``prices`` stays exactly once."""
    world, workers, raw = two_members(seqs=300)
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        _planned_move_to_b(world, workers, raw)
        for _ in range(40):
            apply_step(world, workers, ("advance", 0.01), raw)
            world.pump()
            _turn(world, a, 50)
            world.pump()
            b.tend()
            if 0 in b.active:
                break
        assert 0 in b.active
        assert not world.acquired_sent.get(0)
        world.move(0, "A", planned=True, zombie_s=0.0)  # no event reaches B
        world.clock.advance(0.03)  # past the worker's tend interval (20 ms)
        _turn(world, b, 50)
        assert 0 not in b.wanted, "B still wants a partition NELI no longer assigns it"
        relay_for(world, workers, raw, "AB", 4.0)
        assert 0 in a.active
        assert 0 not in b.active
        assert a.stats.relayed > 0
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


@pytest.mark.parametrize(("back_after_s", "settled"), [(2.6, True), (0.8, False)])
def test_a_partition_back_on_its_own_ended_term_waits_only_for_its_own_output(
    back_after_s: float, settled: bool
) -> None:
    """A hands partition 0 over to B, but its output fails: it stops on B's request with no
    release. B is revoked before it took 0 up (its release of the unbegun term makes A's the
    latest again), and ``back_after_s`` later the group gives 0 back to A. The latest term is
    A's own: it knows first-hand when its output settled. Settled before A asked again, the
    grace period ends at once and A takes 0 up under the marker it asked with; before, it
    waited out the grace period and the drain of an owner handing over (3.3 s here; 8.7 s of
    silence in a CI run of the broker-stall test). Not settled yet, the grace period runs,
    then A marks the end again at once (its output has settled by then). ``prices`` stays
    exactly once either way."""
    world, workers, raw = two_members(evidence_share=0.0, seqs=400)
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        apply_step(world, workers, ("move", 0, "B", True, 0.0), raw)
        relay_for(world, workers, raw, "A", 0.1)  # A announces the hand-over, emits on
        apply_step(world, workers, ("fail", "A", 0.3), raw)  # its output fails from here
        relay_for(world, workers, raw, "A", 0.05)
        for _ in range(20):
            relay_for(world, workers, raw, "B", 0.05)
            if b._grace._probes:
                break
        assert 0 in b._grace._early, "B did not ask with an early marker"
        relay_for(world, workers, raw, "AB", 0.3)
        assert 0 not in a.active, "A did not stop on B's request"
        assert 0 not in b.active
        world.move(0, None, planned=True, zombie_s=0.0)  # B revoked before it took 0 up
        relay_for(world, workers, raw, "AB", back_after_s)
        assert 0 not in b._grace._early, "B kept its early marker"
        world.move(0, "A", planned=True, zombie_s=0.0)
        assigned = world.clock.now
        taken = None
        for _ in range(100):
            relay_for(world, workers, raw, "AB", 0.05)
            if 0 in a.active:
                taken = world.clock.now
                break
        assert taken is not None, "A never took partition 0 up again"
        asked = [m for m in takeover_markers(world, 0, a._control._member) if m > 0]
        assert a._terms[0] == asked[-1]
        if settled:
            assert taken - assigned < 0.3, f"waited {taken - assigned:.2f} s for its own term"
            assert len(asked) == 1, "a second marker after its own settled term"
        else:
            assert world.threshold_s <= taken - assigned < world.threshold_s + 0.3
            assert len(asked) == 2, "no second marker: its records may lie above the first"
        relay_for(world, workers, raw, "AB", 1.0)
        assert a.stats.relayed > 0
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations
