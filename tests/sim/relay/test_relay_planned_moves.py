"""Planned moves simulated step by step: the successor asks a live owner before it fences.

A planned move (SIGTERM, a member joining) is handed over: the old owner emits until its
successor asks (a probe), then releases, and the successor takes over on the release. When the
group takes longer than T + e to assign the partition again (a member leaving: the others learn
of the rebalance only at their next group heartbeat), NELI ends the successor's grace period on
evidence the moment it is assigned, before any probe. The old owner is still emitting then:
fencing it at once aborts its open transaction (its records re-emitted, and on Apache Kafka
``init_transactions`` waits for the abort), which made the slowest planned moves of the
takeover benchmark. These tests drive that situation by hand (:mod:`tests.sim.relay.hand_driven`).
"""

from __future__ import annotations

from typing import Any

import pytest

from pricing_ha.dedupe.control import PROBE, RELEASE, TAKEOVER, control_kind
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.kafka.headers import header_dict
from tests.sim.relay.hand_driven import a_takes_partition_0, relay_for, two_members
from tests.sim.relay.relay_checker import Checker
from tests.sim.relay.relay_clock import simulated_time

_T_PLUS_E_S = 1.6 + 0.2  # the hand-driven relay's T, and the clock skew bound e


def _controls(world: Any, partition: int) -> list[tuple[bytes, str]]:
    """The control records on ``prices[partition]``, in order: (kind, writer)."""
    out = []
    for msg in world.topic(world.prices)[partition]:
        control = control_kind(msg.key(), msg.headers())
        if control is not None:
            out.append((control[0], header_dict(msg.headers()).get("relay", "")))
    return out


def _move_after_a_slow_rebalance(world: Any, workers: dict[str, Any], raw: Any) -> None:
    """A hands partition 0 over (planned) and emits on while the group takes longer than
    T + e to give it to B: NELI's evidence ends B's grace period at once."""
    a_takes_partition_0(world, workers, raw)
    world.move(0, None, planned=True, zombie_s=0.0)
    relay_for(world, workers, raw, "AB", _T_PLUS_E_S + 0.1)
    assert 0 in workers["A"]._handovers, "A stopped handing over before B was assigned"
    world.move(0, "B", planned=True, zombie_s=0.0)


def test_a_successor_whose_grace_period_ended_on_evidence_asks_a_live_owner_first() -> None:
    """B's grace period is over as soon as it is assigned, but A is still emitting: B probes
    and takes the partition over once A has released it (no fence of A's open transaction),
    and ``prices`` stays exactly once."""
    world, workers, raw = two_members(seqs=300, evidence_share=1.0)
    a, b = workers["A"], workers["B"]
    with simulated_time(world.clock):
        _move_after_a_slow_rebalance(world, workers, raw)
        relay_for(world, workers, raw, "AB", 1.0)
        assert 0 in b.active
        assert 0 not in a.active
    kinds = _controls(world, 0)
    b_takeover = max(i for i, (kind, who) in enumerate(kinds) if kind == TAKEOVER and who == "B")
    before = kinds[:b_takeover]
    a_term = max(i for i, (kind, who) in enumerate(before) if kind == TAKEOVER and who == "A")
    assert (PROBE, "B") in before[a_term:], f"B fenced A without asking: {kinds}"
    assert (RELEASE, "A") in before[a_term:], f"B fenced A before its release: {kinds}"
    assert a.stats.delivery_failures == 0, "A's output failed: it was fenced mid-transaction"
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations


def test_an_owner_that_does_not_answer_the_request_is_fenced_soon_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As above, but A ignores B's probe (its hand-over rule broken): B does not wait for a
    release that never comes, it fences A 0.3 s after asking, and ``prices`` stays exactly
    once (the broker rejects A's later writes)."""
    monkeypatch.setattr(
        StandbyTail, "unrequested_within", lambda self, p, offset, fresh, read_as_of=None: True
    )
    world, workers, raw = two_members(seqs=300, evidence_share=1.0)
    b = workers["B"]
    with simulated_time(world.clock):
        _move_after_a_slow_rebalance(world, workers, raw)
        assigned = world.clock.now
        for _ in range(20):
            relay_for(world, workers, raw, "AB", 0.05)
            if 0 in b.active:
                break
        assert 0 in b.active, "B waited more than 1 s for a release"
        waited = world.clock.now - assigned
        assert waited < 0.6, f"B took {waited:.2f} s to fence an owner that did not answer"
        relay_for(world, workers, raw, "AB", 1.0)
    checker = Checker(world)
    checker.scan(0)
    assert not checker.violations, checker.violations
