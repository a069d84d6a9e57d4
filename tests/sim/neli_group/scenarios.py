"""The simulated groups: the shipped defaults first, then the library's other combinations."""

from __future__ import annotations

from dataclasses import replace

from neli import Mode, Variant
from pricing_ha.config import PublisherNeliConfig, RelayConfig
from tests.sim.neli_group.group_schedule import Scenario

_RELAY = RelayConfig()  # the shipped relay timing, so the simulation follows any change to it
_PUBLISHERS = PublisherNeliConfig()  # likewise the publishers'

#: config/default.toml [neli]: publishers, full non-exclusive, cooperative-sticky (the default).
PUBLISHERS = Scenario(
    name="publishers-default",
    variant=Variant.FULL,
    mode=Mode.NON_EXCLUSIVE,
    session_ms=_PUBLISHERS.session_timeout_ms,
    threshold_ms=_PUBLISHERS.threshold_ms,
    pulse_ms=_PUBLISHERS.pulse_interval_ms,
    keep_leading=_PUBLISHERS.keep_leading_when_isolated,
    frozen_pauses=True,
    wall_steps_beyond_e=True,  # non-exclusive mode never reads the wall clock
)
#: config/default.toml [relay]: fast exclusive, eager round-robin.
RELAY = Scenario(
    name="relay-default",
    variant=Variant.FAST,
    mode=Mode.EXCLUSIVE,
    session_ms=_RELAY.session_timeout_ms,
    threshold_ms=_RELAY.threshold_ms,
    skew_ms=_RELAY.clock_skew_ms,
    pulse_ms=_RELAY.pulse_interval_ms,
    cooperative=False,
    # The fast variant ends a grace period early on the previous holder's heartbeat timestamps,
    # so its wall clock must keep within e too (as in the full exclusive variant).
)

SCENARIOS: dict[str, Scenario] = {
    sc.name: sc
    for sc in (
        PUBLISHERS,
        RELAY,
        # Both again with a coordinator that, resuming after a broker stall, expires members
        # before reading what they sent during it (a paused broker's expiry timer and request
        # handlers resume together, so either order can come first).
        replace(PUBLISHERS, name="publishers-stall-expires-first", stall_expires_first=True),
        replace(RELAY, name="relay-stall-expires-first", stall_expires_first=True),
        Scenario(
            name="publishers-eager",
            variant=Variant.FULL,
            mode=Mode.NON_EXCLUSIVE,
            session_ms=3000,
            threshold_ms=4500,
            keep_leading=True,
            cooperative=False,
            frozen_pauses=True,
            wall_steps_beyond_e=True,
        ),
        # The library's defaults: T = 2S in non-exclusive mode, keep_leading_when_isolated off.
        Scenario(
            name="full-nonexclusive-lib",
            variant=Variant.FULL,
            mode=Mode.NON_EXCLUSIVE,
            session_ms=3000,
            threshold_ms=6000,
            frozen_pauses=True,
            wall_steps_beyond_e=True,
        ),
        Scenario(
            name="fast-nonexclusive-lib",
            variant=Variant.FAST,
            mode=Mode.NON_EXCLUSIVE,
            session_ms=3000,
            threshold_ms=6000,
            frozen_pauses=True,
            wall_steps_beyond_e=True,
        ),
        # T = 0.6 (S - e) in exclusive mode.
        Scenario(
            name="full-exclusive-lib",
            variant=Variant.FULL,
            mode=Mode.EXCLUSIVE,
            session_ms=3000,
            threshold_ms=1680,
        ),
        Scenario(
            name="full-exclusive-eager",
            variant=Variant.FULL,
            mode=Mode.EXCLUSIVE,
            session_ms=3000,
            threshold_ms=1680,
            cooperative=False,
        ),
        Scenario(
            name="fast-exclusive-cooperative",
            variant=Variant.FAST,
            mode=Mode.EXCLUSIVE,
            session_ms=3000,
            threshold_ms=2000,
        ),
    )
}
