"""The takeover detector simulated step by step: an owner crashes, or sleeps past D and wakes.

Each test builds a two-member world with fencing and the detector on (simulated NELI
heartbeats, :mod:`tests.sim.relay.relay_members`), lets A own and relay partition 0, then breaks A:
B must take the partition over on suspicion well before the group notices (S), and
``prices`` must stay exactly once, whatever A writes when it wakes.
"""

from __future__ import annotations

import random
from typing import Any

from tests.sim.relay.hand_driven import relay_for
from tests.sim.relay.relay_checker import Checker
from tests.sim.relay.relay_clock import simulated_time
from tests.sim.relay.relay_schedule import apply_step, build, drain, report, run
from tests.sim.relay.relay_steps import Step, raw_prices


def _a_owns_partition_0(seed: int = 3) -> tuple[Any, dict[str, Any], Any, Checker]:
    """A owns and relays partition 0, B the others; both caught up, heartbeats flowing."""
    world, workers = build(seed, ghosts=False, verbose=True, detector=True)
    raw = raw_prices(seed, seqs=200)
    checker = Checker(world)
    with simulated_time(world.clock):
        apply_step(world, workers, ("publish", 0, 5), raw)
        apply_step(world, workers, ("move", 0, "A", False, 0.0), raw)
        for p in (1, 2, 3):  # B's, without input: its heartbeats show it alive
            apply_step(world, workers, ("move", p, "B", False, 0.0), raw)
        _relay(world, workers, raw, checker, names="AB", s=1.5)
    assert 0 in workers["A"].active
    return world, workers, raw, checker


def _relay(world: Any, workers: Any, raw: Any, checker: Checker, *, names: str, s: float) -> None:
    """Prices keep arriving for ``s`` seconds (steps of 25 ms) while members ``names`` turn."""
    relay_for(world, workers, raw, names, s, step_s=0.025, checker=checker)


def test_a_crashed_owner_is_taken_over_on_suspicion_before_the_group_notices() -> None:
    """A crashes: B, the only live member, takes partition 0 over within D and a little,
    long before the group moves it (S), and nothing is duplicated or lost."""
    world, workers, raw, checker = _a_owns_partition_0()
    b = workers["B"]
    d_s = b.detector.threshold_s
    with simulated_time(world.clock):
        apply_step(world, workers, ("crash", "A"), raw)
        crashed = world.clock.now
        while 0 not in b.active and world.clock.now - crashed < 0.9:
            _relay(world, workers, raw, checker, names="B", s=0.025)
        took = world.clock.now - crashed
        assert world.owner[0] == "A"  # the group has not noticed yet
        assert 0 in b.active, world.trace[-40:]
        assert d_s < took < d_s + 0.3
        assert world.members.suspicions == 1
        assert world.members.wrong_suspicions == 0
        _relay(world, workers, raw, checker, names="B", s=2.0)  # the group notices, assigns B
        assert drain(world, workers, raw, checker)
    assert not checker.violations, checker.violations


def test_an_owner_woken_after_d_is_fenced_and_its_records_rejected() -> None:
    """A sleeps past D (less than T, so NELI does not hold it off) with records in flight:
    B takes partition 0 over on suspicion (wrongly: A lives). A wakes and sends them on: the
    broker rejects them, A (the group's assignee) takes the partition back from B, the two writers
    never interleave, and ``prices`` stays exactly once."""
    world, workers, raw, checker = _a_owns_partition_0()
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        # A stops in its next flush, its transaction open and its records unsent.
        apply_step(world, workers, ("pause-in-flush", "A", 0.55), raw)
        _relay(world, workers, raw, checker, names="AB", s=0.1)  # A's turns do nothing: asleep
        assert world.members.suspicions == 1
        assert world.members.wrong_suspicions == 1
        assert 0 in b.active
        assert b.stats.suspicions == 1
        _relay(world, workers, raw, checker, names="AB", s=2.0)
        assert world.fenced_records > 0, "the zombie wrote nothing after its fence"
        assert 0 in a.active
        assert 0 not in b.active  # handed back to the group's assignee
        assert drain(world, workers, raw, checker)
    assert not checker.violations, checker.violations


def test_no_takeover_on_suspicion_without_a_fault() -> None:
    """Owners that run, with input or without, on every partition, and time passing in steps
    of up to 100 ms between their turns: nothing is ever suspected."""
    rng = random.Random(11)
    steps: list[Step] = [("move", p, "AB"[p % 2], False, 0.0) for p in range(4)]
    for _ in range(300):
        steps.append(rng.choice([("turn", "A", 20), ("turn", "B", 20), ("tail", "A")]))
        steps.append(("publish", rng.randrange(3), rng.randint(0, 2)))  # none on partition 3
        steps.append(("advance", rng.choice([0.005, 0.02, 0.1])))
    outcome = run(11, steps, detector=True)
    assert not outcome.failed, report(outcome)
    assert outcome.relayed > 100
    assert outcome.suspicions == 0
