"""The standby's takeover detector on the real broker: a relay crash costs less than the group.

The relay group's session timeout is 6 s here (MSK's default minimum), so the group alone
would leave a crashed owner's partitions of ``prices`` silent for at least that long. Judged
from ``prices`` read back ``read_committed``: every seq once and in order, and the longest
silence per instrument (from the relay's record timestamps).
"""

from __future__ import annotations

import time

import pytest

from pricing_ha.local.cluster import PricingCluster
from tests.integration.feed_end import end_feed_once_flowing
from tests.integration.relay.test_relay import _explain, _silence, _wait_exactly_once

RELAY_S = 6.0
TICK_S = 0.1
# The detector's threshold D (350 ms) + the takeover (fence, marker, marks) + the backlog, on
# 2 cores shared by the broker and six processes: far below the group's S.
BOUND_S = 2.5


@pytest.fixture
def cluster_env() -> dict[str, str]:
    """Every process of the cluster runs the relay group at S = 6 s."""
    return {
        "PRICING_HA__RELAY__SESSION_TIMEOUT_MS": str(int(RELAY_S * 1000)),
    }


def _start(cluster: PricingCluster) -> None:
    cluster.publisher("p1", "a")
    cluster.publisher("p2", "a")
    cluster.relay("r1")
    cluster.relay("r2")
    cluster.wait_led(["p1", "p2", "relay"])
    cluster.feed(instruments=12, rate=1 / TICK_S, duration=60)


def _judge(cluster: PricingCluster, after_ms: float) -> float:
    end_feed_once_flowing(cluster, "prices", time.time() * 1000 + 1000, timeout_s=120)
    _wait_exactly_once(cluster)
    prices = [r for r in cluster.read("prices") if r.timestamp_ms >= after_ms - 5000]
    silence = _silence(prices)
    worst = max(silence.values())
    print(f"longest silence on prices: {worst:.2f} s (bound {BOUND_S} s, S = {RELAY_S} s)")
    assert worst < BOUND_S, _explain(prices, max(silence, key=lambda i: silence[i]))
    return worst


def test_relay_sigkill_is_taken_over_long_before_the_group_notices(
    cluster: PricingCluster,
) -> None:
    """SIGKILL of a relay owner: prices silent far less than S; every seq once, in order."""
    _start(cluster)
    time.sleep(5)
    killed_ms = time.time() * 1000
    cluster.members["relay-r1"].kill()
    time.sleep(RELAY_S + 4)  # the group then rebalances: a planned move, no silence
    _judge(cluster, killed_ms)


def test_relay_sigstop_zombie_is_fenced_and_its_records_never_visible(
    cluster: PricingCluster,
) -> None:
    """SIGSTOP past D (not S), then SIGCONT: taken over, the zombie fenced, and alive; every
    seq once; then a SIGTERM of the other relay is handed to the woken one."""
    _start(cluster)
    time.sleep(5)
    stopped_ms = time.time() * 1000
    r1 = cluster.members["relay-r1"]
    r1.pause()
    time.sleep(RELAY_S / 2)
    r1.resume()
    time.sleep(RELAY_S)
    assert r1.alive(), f"the woken relay died:\n{r1.log_tail(40)}"
    assert "relay failed" not in r1.log_path.read_text(), r1.log_tail(40)
    cluster.members["relay-r2"].terminate()  # its partitions go to the woken relay
    time.sleep(3)
    assert r1.alive(), f"the woken relay died:\n{r1.log_tail(40)}"
    assert "relay failed" not in r1.log_path.read_text(), r1.log_tail(40)
    _judge(cluster, stopped_ms)


def test_two_relays_crashing_one_after_the_other_leave_the_third_with_everything(
    cluster: PricingCluster,
) -> None:
    """SIGKILL of two relays 1 s apart (the second may hold the first's partitions): the third
    takes everything over long before the group notices; every seq once, in order."""
    cluster.relay("r3")
    _start(cluster)
    time.sleep(5)
    killed_ms = time.time() * 1000
    cluster.members["relay-r1"].kill()
    time.sleep(1.0)  # a takeover of r1's partitions may be under way
    cluster.members["relay-r2"].kill()
    time.sleep(RELAY_S + 4)
    assert cluster.members["relay-r3"].alive()
    _judge(cluster, killed_ms)


def test_a_relay_joining_during_a_takeover_costs_no_gap(cluster: PricingCluster) -> None:
    """SIGKILL of a relay, and a new one started at once (the group rebalances while the
    survivor takes the dead one's partitions over): every seq once, in order, bounded."""
    _start(cluster)
    time.sleep(5)
    killed_ms = time.time() * 1000
    cluster.members["relay-r1"].kill()
    cluster.relay("r3")
    time.sleep(RELAY_S + 6)
    _judge(cluster, killed_ms)


def test_short_pauses_of_a_live_owner_cost_moves_never_a_gap(cluster: PricingCluster) -> None:
    """SIGSTOP of an owner for just past D (no stall NELI notices), five times: each time
    the other relay takes its partitions over and it takes them back; every seq once."""
    _start(cluster)
    time.sleep(5)
    paused_ms = time.time() * 1000
    r1 = cluster.members["relay-r1"]
    for _ in range(5):
        r1.pause()
        time.sleep(0.5)
        r1.resume()
        time.sleep(2.0)
    time.sleep(3)
    _judge(cluster, paused_ms)
