"""Helpers for the hand-driven relay simulation tests: a two-member world on one partition,
an owner relaying steadily, prices arriving while members turn, takeover markers read back."""

from __future__ import annotations

from typing import Any

from tests.sim.relay.relay_checker import Checker
from tests.sim.relay.relay_schedule import apply_step, build
from tests.sim.relay.relay_steps import raw_prices

#: The relay timing these step-by-step scenarios were written for: their clock advances and
#: bounds are set against it (a grace period of 1.6 s spans many steps of 0.05 s).
HAND_DRIVEN_RELAY = {
    "session_timeout_ms": 2000,
    "threshold_ms": 1600,
    "pulse_interval_ms": 300,
}


def two_members(seqs: int | None = None, evidence_share: float | None = None) -> Any:
    """Members A and B of a relay group on one partition; the raw prices."""
    world, workers = build(0, ghosts=False, verbose=False, relay=HAND_DRIVEN_RELAY)
    if evidence_share is not None:
        world.evidence_share = evidence_share
    raw = raw_prices(0) if seqs is None else raw_prices(0, seqs=seqs)
    return world, workers, raw


def a_takes_partition_0(world: Any, workers: dict[str, Any], raw: Any) -> None:
    """Member A owns partition 0 and relays prices arriving steadily (2.5 s of them)."""
    apply_step(world, workers, ("publish", 0, 10), raw)
    world.move(0, "A", planned=False, zombie_s=0.0)
    for _ in range(50):
        apply_step(world, workers, ("advance", 0.05), raw)
        apply_step(world, workers, ("publish", 0, 1), raw)
        world.pump()
        apply_step(world, workers, ("turn", "A", 50), raw)
    assert 0 in workers["A"].active
    assert workers["A"].stats.relayed > 0


def relay_for(
    world: Any,
    workers: dict[str, Any],
    raw: Any,
    names: str,
    s: float,
    *,
    step_s: float = 0.05,
    checker: Checker | None = None,
) -> None:
    """Prices keep arriving for ``s`` seconds (steps of ``step_s``) while the members
    ``names`` turn; ``checker`` scans ``prices`` after every step."""
    for _ in range(round(s / step_s)):
        apply_step(world, workers, ("advance", step_s), raw)
        apply_step(world, workers, ("publish", 0, 1), raw)
        world.pump()
        for name in names:
            apply_step(world, workers, ("turn", name, 50), raw)
        if checker is not None:
            checker.scan(0)


def takeover_markers(world: Any, partition: int, relay: str) -> list[int]:
    """Offsets of ``relay``'s takeover markers on ``prices[partition]``."""
    found = []
    for msg in world.topic(world.prices)[partition]:
        headers = dict(msg.headers() or [])
        if headers.get("pricing-ha-control") == b"takeover" and headers.get("relay") == (
            relay.encode()
        ):
            found.append(msg.offset())
    return found
