"""Planned relay moves and a broker stall during a takeover, judged from ``prices``.

A relay joining, and a relay stopped with SIGTERM, hand their partitions over: the old owner
emits until its successor asks, then releases, and the successor takes the end from the
release. Subscribers must barely notice: the longest silence of any instrument across each
move is bounded well below a fail-over (which costs S + a rebalance + T). The second test
pauses the broker while a successor is taking over from a killed relay: nothing may be
duplicated, lost or reordered, and ``prices`` must resume.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from pricing_ha.config import RelayConfig
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import SESSION_MS, PricingCluster, Record
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.waiting import wait_for
from tests.integration.feed_end import end_feed_once_flowing
from tests.integration.relay.test_relay import _explain, _wait_exactly_once

S = SESSION_MS / 1000
TICK_S = 0.1
# A hand-over measured 0.13-0.56 s in development runs (the release's and the takeover
# marker's round trips, then the successor's first fetch); a fail-over costs 6-9 s. The bound
# leaves room for a loaded CI machine and still fails on a move that waits for a fail-over.
PLANNED_MOVE_BOUND_S = 2.0


def _silence_between(records: list[Record], lo_ms: float, hi_ms: float) -> dict[str, float]:
    """Per instrument, the longest gap between consecutive prices ending in [lo_ms, hi_ms]."""
    by: dict[str, list[int]] = {}
    for r in records:
        if r.key is not None:
            by.setdefault(r.key.decode(), []).append(r.timestamp_ms)
    return {
        k: max((b - a for a, b in itertools.pairwise(sorted(ts)) if lo_ms <= b <= hi_ms), default=0)
        / 1000
        for k, ts in by.items()
    }


def _took(cluster: PricingCluster, relay: str) -> int:
    return cluster.members[f"relay-{relay}"].log_path.read_text().count("relay took partition")


def _two_relays(cluster: PricingCluster) -> Proc:
    """Topics, one publisher per group, relay r1 owning every partition, then r2 joining and
    taking some over; returns r1."""
    cluster.create_topics()
    cluster.publisher("p1", "a")
    cluster.publisher("p2", "a")
    r1 = cluster.relay("r1")
    cluster.wait_led(["p1", "p2", "relay"])
    wait_for(lambda: _took(cluster, "r1") >= cluster.partitions, 60, "r1 to take every partition")
    cluster.relay("r2")
    wait_for(lambda: _took(cluster, "r2") >= 1, 60, "r2 to take partitions over")
    return r1


def test_a_relay_joining_and_one_stopping_hand_over_without_a_fail_over_gap(
    cluster: PricingCluster,
) -> None:
    """Join, then SIGTERM of the first relay: exactly once, and each move barely visible."""
    cluster.publisher("p1", "a")
    cluster.publisher("p2", "a")
    r1 = cluster.relay("r1")
    cluster.wait_led(["p1", "p2", "relay"])
    cluster.feed(instruments=12, rate=1 / TICK_S, duration=10 * S + 10)
    wait_for(lambda: _took(cluster, "r1") >= cluster.partitions, 60, "r1 to take every partition")
    time.sleep(S)  # prices flowing from r1 before the move (the fault's timing)
    join_ms = time.time() * 1000
    cluster.relay("r2")
    wait_for(lambda: _took(cluster, "r2") >= 1, 60, "r2 to take partitions over")
    # r1 checkpointed the partitions it emits on: r2's standby started from them, not from
    # the start of prices.
    joined = cluster.members["relay-r2"].log_path.read_text()
    assert "resume from checkpoints" in joined
    assert "partitions [] resume" not in joined, "r2 found no checkpoint at all"
    time.sleep(2 * S)  # let the rebalance settle before the next move
    term_ms = time.time() * 1000
    r1.terminate()
    assert r1.wait(30) == 0, "SIGTERM must end the relay cleanly"
    wait_for(
        lambda: _took(cluster, "r2") >= cluster.partitions,
        60,
        "r2 to take every partition",
    )
    end_ms = term_ms + 3 * S * 1000
    end_feed_once_flowing(cluster, "prices", end_ms)
    _wait_exactly_once(cluster)
    prices = cluster.read("prices")
    for what, lo, hi in (("join", join_ms, term_ms), ("SIGTERM", term_ms, end_ms)):
        silence = _silence_between(prices, lo, hi)
        worst = max(silence, key=lambda i: silence[i])
        print(f"longest silence on prices across the {what}: {silence[worst]:.2f} s")
        assert silence[worst] < PLANNED_MOVE_BOUND_S, f"{what}: {_explain(prices, worst)}"


def test_a_broker_stall_during_a_takeover_keeps_prices_exactly_once(
    own_broker: LocalKafka, procs: ProcessGroup, tmp_path: Path
) -> None:
    """SIGKILL of the owner, then the broker paused for 2 s while the successor takes over."""
    cluster = PricingCluster(procs, own_broker.bootstrap, tmp_path)
    r1 = _two_relays(cluster)
    cluster.feed(instruments=12, rate=1 / TICK_S, duration=10 * S + 10)
    time.sleep(2 * S)  # prices flowing from both relays (the fault's timing)
    r1.kill()
    # The session expires after S; the rebalance and the takeover follow: pause in the middle.
    time.sleep(S + 0.5)
    own_broker.pause()
    try:
        time.sleep(2.0)  # the stall's duration, not a wait for a condition
    finally:
        own_broker.resume()
    resumed_ms = time.time() * 1000
    # Every instrument must flow on prices after the stall; the feed ends once they all have.
    end_feed_once_flowing(cluster, "prices", resumed_ms + 1000)
    _wait_exactly_once(cluster)
    prices = cluster.read("prices")
    after = {r.key.decode() for r in prices if r.key is not None and r.timestamp_ms > resumed_ms}
    assert after == set(cluster.expected()), "every instrument flows on prices after the stall"


def test_a_broker_stall_longer_than_the_relays_session_does_not_wait_for_their_group(
    own_broker: LocalKafka, procs: ProcessGroup, tmp_path: Path
) -> None:
    """The broker paused past the relays' S, so every relay's session expires at once: each
    hands its partitions over instead of stopping, so ``prices`` resumes with the broker,
    not once the relay group has re-formed (every relay rejoined, a rebalance, then the
    takeovers), and stays exactly once."""
    relay_s = RelayConfig().session_timeout_ms / 1000
    stall_s = relay_s + 0.5
    cluster = PricingCluster(procs, own_broker.bootstrap, tmp_path)
    _two_relays(cluster)
    cluster.feed(instruments=12, rate=1 / TICK_S, duration=6 * S + 10)
    time.sleep(2 * S)  # prices flowing from both relays (the fault's timing)
    paused_ms = time.time() * 1000
    own_broker.pause()
    try:
        time.sleep(stall_s)  # the stall's duration, not a wait for a condition
    finally:
        own_broker.resume()
    end_ms = paused_ms + (stall_s + 4 * S) * 1000
    end_feed_once_flowing(cluster, "prices", end_ms)
    _wait_exactly_once(cluster)
    prices = cluster.read("prices")
    silence = _silence_between(prices, paused_ms, end_ms)
    worst = max(silence, key=lambda i: silence[i])
    print(
        f"longest silence on prices across a {stall_s:.1f} s broker stall: {silence[worst]:.2f} s"
    )
    # The stall itself, then at most a planned move's worth (the tails reading prices again,
    # the hand-overs' tails fresh again; later the re-formed group's moves).
    assert silence[worst] < stall_s + PLANNED_MOVE_BOUND_S, _explain(prices, worst)
