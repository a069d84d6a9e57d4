"""Broker faults on a three-node cluster (racks a/b/c, RF 3, min ISR 2), judged from outside.

The feed writes 8 instruments at 10 Hz each to ``md.quotes`` (4 partitions); two publishing
groups (one member each) and two relays run as processes. After the fault, ``prices`` is read
back ``read_committed``: every quote the feed got acknowledged reaches it exactly once and in
order per instrument, and the longest silence per instrument (from the relay's record
timestamps) stays under a bound. The local cluster fences a dead node after
``broker.session.timeout.ms`` = 3 s (pricing_ha.local.kafka_node), so a partition led by it has
no leader for about that long: no client setting can make that shorter. The bounds (see
``BOUND_S`` and the others) hold what was measured under shared load with a margin; they are
above the goal of issue #47, because the relay takes a partition over again after every
leader move, an open finding (docs/measurements.md, broker faults on three nodes).
"""

from __future__ import annotations

import time

import pytest

from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.broker_faults import (
    busiest_leader,
    coordinator,
    leader_counts,
    wait_full_isr,
    wipe_data,
)
from pricing_ha.local.cluster import PricingCluster, Record
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.publisher import neli_group_id
from pricing_ha.publishing.quote_worker import quotes_group_id
from tests.integration.feed_end import end_feed_once_flowing
from tests.integration.relay.test_relay import _explain, _silence, _wait_exactly_once

TICK_S = 0.1
INSTRUMENTS = 8
FENCE_S = 3.0  # broker.session.timeout.ms of the local cluster
# A partition without a leader for FENCE_S fails the relay's open transaction, and the
# partition is taken over again: 5-10 s more. Measured 5.5, 7.2 and 12.1 s (SIGKILL) and 4.0 s
# (SIGSTOP) under load averages of 30-60; with librdkafka's default client settings 61 s. The
# goal of issue #47 (the cluster's own recovery + 0.5 s) is not met: an open finding.
BOUND_S = 20.0
# Faults that move every partition (a rolling restart) or keep one node catching up for long (a
# wiped disk): a guard against a stall, not the goal. Measured under shared load (load average
# 45-90 on two cores): 43 s and 52 s, the relay's takeovers failing again and again after
# the leader moves, while the goal of issue #47 is 2 ticks + the reorder window.
LONG_BOUND_S = 75.0
# The coordinator's node also coordinates the relay group and transactions, so every partition
# of prices waits for the relay there: measured 12.8 s under the same load.
COORDINATOR_BOUND_S = 25.0
LAG_MS = 2000  # replica.lag.time.max.ms for the SIGSTOP test (Kafka's and MSK's default: 30 s)
INTERNAL = ["__consumer_offsets", "__transaction_state"]
PUB = ("p1", "p2")


def _start(c: PricingCluster) -> None:
    c.publisher("p1", "a")
    c.publisher("p2", "a")
    c.relay("r1")
    c.relay("r2")
    c.wait_led(["p1", "p2", "relay"], timeout=180)
    c.feed(instruments=INSTRUMENTS, rate=1 / TICK_S, duration=180)
    wait_for(
        lambda: _priced(c) == INSTRUMENTS,
        60,
        lambda: f"{_priced(c)} instruments priced before the fault",
    )


def _priced(c: PricingCluster) -> int:
    """How many instruments ``prices`` has carried a price of so far."""
    return len({r.key for r in c.read("prices", idle_s=0.3, live=True) if r.seq is not None})


def _topics(c: PricingCluster) -> list[str]:
    return [*c.topics.values(), *INTERNAL]


def _judge(c: PricingCluster, fault_ms: float, bound_s: float = BOUND_S) -> float:
    """Every acknowledged quote once and in order on prices, every process alive, and the
    longest silence per instrument since the fault under ``bound_s``; returns it."""
    end_feed_once_flowing(c, "prices", time.time() * 1000 + 1000, timeout_s=120)
    summary = c.feed_summary()
    assert summary["failed"] == 0, f"the feed lost quotes to the fault: {summary}"
    _wait_exactly_once(c)
    for name, proc in c.members.items():
        if name not in {"feed", "topics-create"}:
            assert proc.alive(), f"{name} died:\n{proc.log_tail(40)}"
    prices: list[Record] = [r for r in c.read("prices") if r.timestamp_ms >= fault_ms - 2000]
    silence = _silence(prices)
    worst = max(silence.values())
    shown = {k: round(v, 2) for k, v in sorted(silence.items())}
    print(f"longest silence on prices per instrument: {shown} (bound {bound_s} s)")
    assert worst < bound_s, _explain(prices, max(silence, key=lambda i: silence[i]))
    return worst


def test_sigkill_of_the_broker_leading_most_of_prices(
    kafka3: LocalKafka, cluster3: PricingCluster
) -> None:
    """SIGKILL of the node leading most partitions of prices: every acknowledged quote once,
    in order, on prices; the longest silence stays within the fencing time plus a margin."""
    _start(cluster3)
    admin = cluster3.admin()
    victim = busiest_leader(admin, cluster3.topics["prices"])
    print(f"prices leaders {dict(leader_counts(admin, cluster3.topics['prices']))}: kill {victim}")
    fault_ms = time.time() * 1000
    kafka3.node(victim).kill()
    time.sleep(FENCE_S + 5)
    kafka3.restart_node(victim)
    _judge(cluster3, fault_ms)
    wait_full_isr(admin, _topics(cluster3), 3)


def _publishing_groups(uid: str) -> list[str]:
    return [g(f"{p}-{uid}") for p in PUB for g in (neli_group_id, quotes_group_id)]


@pytest.mark.slow
@pytest.mark.parametrize("cluster3_uid", ["shared-coordinator"], indirect=True)
# Preferred leaders restored within seconds (Kafka's default: every 300 s): the offsets
# partitions keep (or get back) the leaders the uid was chosen for.
@pytest.mark.parametrize(
    "kafka3_overrides",
    [
        {
            "leader.imbalance.check.interval.seconds": "2",
            "leader.imbalance.per.broker.percentage": "0",
        }
    ],
)
def test_sigkill_of_the_publishing_groups_coordinator(
    kafka3: LocalKafka, cluster3: PricingCluster
) -> None:
    """SIGKILL of the node coordinating both NELI groups: every acknowledged quote once,
    in order; the longest silence stays within the fencing time plus a margin."""
    groups = _publishing_groups(cluster3.uid)
    _start(cluster3)
    admin = cluster3.admin()
    neli = [neli_group_id(cluster3.group(p)) for p in PUB]
    wait_for(
        lambda: coordinator(admin, neli[0]) == coordinator(admin, neli[1]),
        60,
        "p1's and p2's NELI groups to share a coordinator (the uid was chosen for it)",
        interval_s=1.0,
    )
    coordinators = {g: coordinator(admin, g) for g in groups}
    victim = coordinators[neli[0]]
    print(f"coordinators {coordinators}: kill {victim}")
    fault_ms = time.time() * 1000
    kafka3.node(victim).kill()
    time.sleep(FENCE_S + 5)
    new = {g: coordinator(admin, g) for g in groups}
    assert victim not in new.values(), new
    kafka3.restart_node(victim)
    _judge(cluster3, fault_ms, COORDINATOR_BOUND_S)


@pytest.mark.slow
@pytest.mark.parametrize("kafka3_overrides", [{"replica.lag.time.max.ms": str(LAG_MS)}])
def test_sigstop_of_a_broker_past_the_replica_lag_time(
    kafka3: LocalKafka, cluster3: PricingCluster
) -> None:
    """SIGSTOP of the node leading most of prices for 3x replica.lag.time.max.ms (2 s here),
    then SIGCONT: it rejoins every ISR; every acknowledged quote once, in order, bounded."""
    _start(cluster3)
    admin = cluster3.admin()
    victim = busiest_leader(admin, cluster3.topics["prices"])
    fault_ms = time.time() * 1000
    kafka3.node(victim).pause()
    time.sleep(3 * LAG_MS / 1000)
    kafka3.node(victim).resume()
    _judge(cluster3, fault_ms)
    wait_full_isr(admin, _topics(cluster3), 3)


@pytest.mark.slow
def test_rolling_restart_of_all_three_brokers(kafka3: LocalKafka, cluster3: PricingCluster) -> None:
    """Controlled shutdown (SIGTERM) and restart of each node in turn, the next only once every
    ISR is full again: every acknowledged quote once, in order, bounded."""
    _start(cluster3)
    admin = cluster3.admin()
    fault_ms = time.time() * 1000
    for node_id in (1, 2, 3):
        began = time.monotonic()
        kafka3.node(node_id).stop(60)
        kafka3.restart_node(node_id)
        took = wait_full_isr(admin, _topics(cluster3), 3)
        print(
            f"node {node_id}: down and back in every ISR in {time.monotonic() - began:.1f} s"
            f" (ISR {took:.1f} s after its restart)"
        )
    _judge(cluster3, fault_ms, LONG_BOUND_S)


@pytest.mark.slow
def test_broker_with_its_data_deleted_re_replicates(
    kafka3: LocalKafka, cluster3: PricingCluster
) -> None:
    """SIGKILL of the node leading most of prices, its partition data deleted, restarted: it
    re-replicates every partition (ISR 3 again); every acknowledged quote once, in order."""
    _start(cluster3)
    admin = cluster3.admin()
    victim = busiest_leader(admin, cluster3.topics["prices"])
    fault_ms = time.time() * 1000
    node = kafka3.node(victim)
    node.kill()
    gone = wipe_data(node)
    assert any(name.startswith(cluster3.topics["prices"]) for name in gone), gone
    time.sleep(FENCE_S + 2)
    kafka3.restart_node(victim)
    wait_full_isr(admin, _topics(cluster3), 3)
    _judge(cluster3, fault_ms, LONG_BOUND_S)
    wait_full_isr(admin, _topics(cluster3), 3)
