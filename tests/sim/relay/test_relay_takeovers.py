"""Relay fail-overs simulated step by step: one world driven by hand, one behaviour each.

Where :mod:`tests.sim.relay.test_relay_sim` runs hundreds of seeded random schedules and checks the
invariants, each test here builds a world (:mod:`tests.sim.relay.relay_schedule`) and drives one
situation through it by hand: a crash takeover with and without NELI's evidence, the read
ahead during a grace period, a stall that holds a member off, an idle partition being handed
over, a fence that ends in RESUMED or in a hand-over, a hand-over whose output fails. Each
asserts what the worker did (waited, emitted, kept its term) and that ``prices`` stayed
exactly once.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.relay.hand_driven import a_takes_partition_0, relay_for, two_members
from tests.sim.relay.relay_checker import Checker
from tests.sim.relay.relay_clock import simulated_time
from tests.sim.relay.relay_schedule import _turn, apply_step


def test_a_crash_takeover_fences_once_its_probe_goes_unanswered() -> None:
    """The owner crashes; its successor probes during its grace period. NELI has no evidence
    about the previous holder here, but the successor does not wait out the grace period T:
    no release 0.3 s after its probe, it ends the grace period, fences the partition and
    takes it up."""
    world, workers, raw = two_members(evidence_share=0.0)
    b = workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        world.move(0, "B", planned=False, zombie_s=0.0)  # A is gone: it never turns again
        world.pump()
        _turn(world, b, 50)  # in its grace period: the probe
        assert 0 in b._grace._probes
        start = world.clock.now
        world.clock.advance(0.35)
        world.pump()
        apply_step(world, workers, ("publish", 0, 1), raw)
        _turn(world, b, 50)
        assert 0 in b.active
        assert world.clock.now - start < world.threshold_s / 2, "waited out the grace period"
        relay_for(world, workers, raw, "B", 0.5)
        assert b.stats.relayed > 0
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


@pytest.mark.parametrize("gone_s", [3.0, 0.3])
def test_a_takeover_on_nelis_evidence_does_not_wait_for_the_old_owners_output(
    gone_s: float,
) -> None:
    """The owner crashes; ``gone_s`` later (S and a rebalance, or less) its successor is
    assigned and NELI ends the grace period on evidence (the owner's last heartbeat). The
    takeover fences the old owner's producer, so nothing of it can land above the marker:
    it waits neither for a release nor for output still in flight, however recently the
    owner was heard from."""
    world, workers, raw = two_members(evidence_share=1.0)
    b = workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        world.move(0, None, planned=False, zombie_s=0.0)  # A crashes: it never turns again
        world.clock.advance(gone_s)
        world.move(0, "B", planned=False, zombie_s=0.0)
        world.clock.advance(0.06)  # B's own heartbeat is back
        world.pump()
        world.tick()  # ACQUIRED
        start = world.clock.now
        _turn(world, b, 50)
        assert 0 in b.active
        waited = world.clock.now - start
        assert waited < 0.3, f"waited {waited:.2f} s for a release or the old output"
        for _ in range(20):
            apply_step(world, workers, ("publish", 0, 1), raw)
            apply_step(world, workers, ("advance", 0.05), raw)
            world.pump()
            _turn(world, b, 50)
        assert b.stats.relayed > 0
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


def test_a_takeover_starts_with_what_it_read_during_the_grace_period() -> None:
    """The successor reads ``prices.raw[k]`` ahead while its grace period runs, emitting
    nothing; the turn that takes the partition up emits at once from what it read, without
    asking for the committed offset and waiting for a first fetch (0.27 s median, 2.4 s at
    worst per takeover in the takeover benchmark). No evidence from NELI: the grace period
    runs until 0.3 s after the probe."""
    world, workers, raw = two_members(evidence_share=0.0)
    b = workers["B"]
    b.read_ahead.max_kept = 20_000
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        world.move(0, "B", planned=False, zombie_s=0.0)  # A is gone: it never turns again
        world.pump()
        for _ in range(3):  # the grace period (0.2 s since the probe), prices arriving
            apply_step(world, workers, ("advance", 0.1), raw)
            apply_step(world, workers, ("publish", 0, 5), raw)
            world.pump()
            apply_step(world, workers, ("turn", "B", 50), raw)
        assert b.stats.relayed == 0, "emitted during the grace period"
        assert b.read_ahead.kept(0) >= 10, "did not read ahead"
        world.clock.advance(0.15)
        world.pump()
        fake: Any = b.consumer
        assigned = dict(fake.positions)
        _turn(world, b, 50)
        assert 0 in b.active
        assert 0 not in b.read_ahead
        assert b.stats.relayed > 0, "the takeover's turn emitted nothing"
        assert fake.positions[0] >= assigned[0], "read again from the start"


def test_a_member_held_off_by_a_stall_does_not_probe_until_it_can_take_over() -> None:
    """A relay woken from a pause is held off by NELI for S + 0.5 s. Its probe would stop the
    owner handing the partition over to it while it cannot emit yet (the fault drill: ~4 s of
    silence), so it probes only once the stall is over; the owner emits until then."""
    world, workers, raw = two_members()
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        world.stalled_until["B"] = world.clock.now + 1.0
        apply_step(world, workers, ("move", 0, "B", True, 0.0), raw)  # planned: A hands over
        apply_step(world, workers, ("turn", "A", 50), raw)
        assert 0 in a._handovers
        relayed = a.stats.relayed
        for _ in range(8):  # 0.8 s of the stall, prices still arriving
            apply_step(world, workers, ("advance", 0.1), raw)
            apply_step(world, workers, ("publish", 0, 1), raw)
            world.pump()
            apply_step(world, workers, ("turn", "B", 50), raw)
            apply_step(world, workers, ("turn", "A", 50), raw)
            assert 0 not in b._grace._probes, "probed while held off by a stall"
            assert not a._handovers._over(0), "the owner stopped before its successor could start"
        assert a.stats.relayed > relayed, "the owner handing over stopped emitting"
        for _ in range(10):
            apply_step(world, workers, ("advance", 0.05), raw)
            world.pump()
            apply_step(world, workers, ("turn", "B", 50), raw)
            apply_step(world, workers, ("turn", "A", 50), raw)
        assert 0 in b.active


def test_an_idle_partition_being_handed_over_emits_when_prices_come() -> None:
    """An owner handing over a partition that had no prices for seconds has nothing of
    its own for its tail to read back, and its tail's end-of-partition event is as old: the
    tail looks stale and the input waits. It writes a tick; once its tail has read the tick
    back, it emits again (the fault drill: such partitions were silent through the whole
    hand-over, 2-3 s, until the successor took them up)."""
    world, workers, raw = two_members()
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        for _ in range(30):  # 3 s without prices
            apply_step(world, workers, ("advance", 0.1), raw)
            world.pump()
            apply_step(world, workers, ("turn", "A", 50), raw)
        world.stalled_until["B"] = world.clock.now + 5.0  # B cannot take over for a while
        apply_step(world, workers, ("move", 0, "B", True, 0.0), raw)
        apply_step(world, workers, ("turn", "A", 50), raw)
        assert 0 in a._handovers
        relayed = a.stats.relayed
        apply_step(world, workers, ("publish", 0, 3), raw)
        for _ in range(10):  # 0.5 s
            apply_step(world, workers, ("advance", 0.05), raw)
            world.pump()
            apply_step(world, workers, ("turn", "B", 50), raw)
            apply_step(world, workers, ("turn", "A", 50), raw)
        assert 0 not in b.active
        assert a.stats.relayed > relayed, "the owner handing an idle partition over stayed paused"


def _group_reforms_without_a(world: Any, workers: dict[str, Any], raw: Any) -> None:
    """The group gives partition 0 to B (re-formed without A): B takes it up, A lets go, and
    nothing on ``prices`` is repeated or out of order."""
    world.move(0, "B", planned=False, zombie_s=0.0)
    relay_for(world, workers, raw, "AB", 3.0)
    assert 0 not in workers["A"].active
    assert 0 in workers["B"].active
    assert workers["B"].stats.relayed > 0
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


def test_a_fenced_owner_keeps_emitting_until_its_successor_asks() -> None:
    """The owner is fenced (its NELI heartbeat late: a broker or coordinator stall), then its
    session is lost and the partition goes to B: it hands the partition over as in a planned
    move, so ``prices`` keeps flowing until B has asked and taken over, exactly once."""
    world, workers, raw = two_members(seqs=200)  # (prices keep coming for the whole test)
    a = workers["A"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        world.fence("A", 0)
        apply_step(world, workers, ("stall", "A", 0.5), raw)  # NELI's stall guard: held off
        before = a.stats.relayed
        relay_for(world, workers, raw, "A", 0.4)
        assert a.stats.relayed == before, "emitted in a hand-over while the stall guard held"
        relay_for(world, workers, raw, "A", 1.0)
        assert 0 in a.active
        assert a.stats.relayed > before, "a fenced owner handing over stopped emitting"
        _group_reforms_without_a(world, workers, raw)


def test_a_fence_then_resume_goes_on_without_a_takeover() -> None:
    """Fenced, then its heartbeats fresh again with nothing changed: the owner goes on under
    its term (no new takeover marker, no rebuild), emitting throughout."""
    world, workers, raw = two_members(seqs=200)  # (prices keep coming for the whole test)
    a = workers["A"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        takeovers, term = a.stats.takeovers, a._terms[0]
        world.fence("A", 0)
        relay_for(world, workers, raw, "A", 0.5)
        world.resume("A", 0)
        before = a.stats.relayed
        relay_for(world, workers, raw, "A", 2.0)
        assert a.stats.relayed > before
        assert a.stats.takeovers == takeovers
        assert a._terms[0] == term
        assert 0 not in a._handovers
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


def test_a_partition_whose_output_fails_while_handed_over_goes_to_its_successor() -> None:
    """The broker stalls past S: the owner is fenced and its records in flight time out. It
    drops the partition (no term of its own goes on after failed output), and once the group
    gives the partition to B, B fences and takes it over: ``prices`` stays exactly once."""
    world, workers, raw = two_members(seqs=200)  # (prices keep coming for the whole test)
    a = workers["A"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        world.fence("A", 0)
        apply_step(world, workers, ("fail", "A", 0.3), raw)  # what is in flight times out
        relay_for(world, workers, raw, "A", 0.8)
        assert a.stats.delivery_failures > 0
        assert 0 not in a.active, "went on after its output failed"
        _group_reforms_without_a(world, workers, raw)


def test_a_fenced_owner_still_assigned_goes_on_past_the_hand_over_bound() -> None:
    """Fenced for longer than the hand-over's bound, but never revoked (nobody else is
    assigned the partition): the owner keeps emitting under its term, and goes on when NELI
    resumes it; before, the bound dropped the partition, silent until NELI resumed it."""
    world, workers, raw = two_members(seqs=600)  # (prices keep coming for the whole test)
    a = workers["A"]
    with simulated_time(world.clock):
        a_takes_partition_0(world, workers, raw)
        takeovers = a.stats.takeovers
        world.fence("A", 0)
        relay_for(world, workers, raw, "A", a._handovers.bound_s + 1.0)
        assert 0 in a._handovers, "the bound ended a hand-over of a partition still assigned"
        before = a.stats.relayed
        relay_for(world, workers, raw, "A", 1.0)
        assert a.stats.relayed > before, "past the bound, no longer emitting"
        world.resume("A", 0)
        relay_for(world, workers, raw, "A", 2.0)
        assert 0 not in a._handovers
        assert a.stats.takeovers == takeovers  # went on under its term
        _group_reforms_without_a(world, workers, raw)
