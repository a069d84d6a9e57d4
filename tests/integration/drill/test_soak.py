"""Soak and chaos runs (marked slow: run with ./scripts/slow-tests, not in CI's default run)."""

from __future__ import annotations

import random
import re
import subprocess
import time
from collections.abc import Callable

import pytest

from pricing_ha.local.cluster import SESSION_MS, PricingCluster
from pricing_ha.local.judging import judge
from pricing_ha.local.waiting import wait_for
from tests.demo_verdict import delivered_verdict

S = SESSION_MS / 1000
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_long_demo_has_a_clean_verdict(
    run_demo: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """Three minutes of the demo's faults at a higher rate: still every price exactly once.

    The verdict is OK or DEGRADED (exit 0 or 5), never FAILED: DEGRADED is every price
    exactly once and in order with a silence over the availability bound, which a relay
    SIGKILL always causes (S + T against a bound of 2 ticks + the reorder window: 0.6 s at
    20 Hz). Since the demo grew that verdict this test asked for OK and failed every run. The
    breaches' causes are not checked here: at 800 quotes/s on 2 cores, ``prices.raw`` itself
    has silences of up to 2 s with no fault near them (the short demo test checks causes).
    """
    result = run_demo("--duration=180", "--instruments=40", "--rate=20", timeout=800)
    _, context = delivered_verdict(result)
    out = result.stdout
    subscriber = re.search(r"independent subscriber: ok=(\w+) duplicates=(\d+) gaps=(\d+)", out)
    assert subscriber is not None, context
    assert subscriber.groups() == ("True", "0", "0"), context


def test_random_chaos_keeps_prices_exactly_once(cluster: PricingCluster) -> None:
    """Random kills, pauses and restarts of publishers and relays for minutes: exactly once."""
    rng = random.Random(7)
    roles = {"p1": 0, "p2": 0, "relay": 0}

    def start(role: str) -> str:
        roles[role] += 1
        name = f"m{roles[role]}"
        if role == "relay":
            cluster.relay(name)
            return f"relay-{name}"
        cluster.publisher(role, name)
        return f"{role}-{name}"

    live = {role: [start(role), start(role)] for role in roles}
    cluster.wait_led(list(roles))
    cluster.feed(instruments=20, rate=10, duration=150)
    end = time.monotonic() + 140
    while time.monotonic() < end:
        time.sleep(rng.uniform(2 * S, 4 * S))
        role = rng.choice(list(roles))
        victim = rng.choice(live[role])
        proc = cluster.members[victim]
        if rng.random() < 0.5:
            proc.kill()
            live[role].remove(victim)
            live[role].append(start(role))
        else:
            proc.pause()
            time.sleep(2 * S)
            proc.resume()
    assert cluster.members["feed"].wait(120) == 0
    expected = cluster.expected()
    wait_for(lambda: judge(expected, cluster.read("prices", idle_s=0.5)).ok, 180, "prices")
    verdict = judge(expected, cluster.read("prices"))
    print(verdict.render())
    assert verdict.ok
