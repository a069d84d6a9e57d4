"""The deduplicated topic under faults of publishers and relays (separate OS processes).

Judged from the data on ``prices``: every (instrument, seq) the feed produced exactly once, in
order, and the longest silence per instrument (from the relay's record timestamps).
"""

from __future__ import annotations

import itertools
import time

from pricing_ha.config import RelayConfig
from pricing_ha.local.cluster import SESSION_MS, PricingCluster, Record
from pricing_ha.local.waiting import wait_for
from tests.integration.feed_end import end_feed_once_flowing

S = SESSION_MS / 1000
TICK_S = 0.1
RELAY_T_S = RelayConfig().threshold_ms / 1000  # the grace after a takeover
CATCH_UP_S = 90.0


def _by_instrument(records: list[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        out.setdefault(r.key.decode(), []).append(r)
    return out


def _exactly_once(cluster: PricingCluster) -> tuple[bool, str]:
    expected = cluster.expected()
    got = _by_instrument(cluster.read("prices", idle_s=0.5))
    for instrument, last in expected.items():
        seqs = [int(r.headers["seq"]) for r in got.get(instrument, [])]
        if seqs != list(range(1, last + 1)):
            dup = len(seqs) - len(set(seqs))
            miss = sorted(set(range(1, last + 1)) - set(seqs))[:5]
            twice = {s for s in seqs if seqs.count(s) > 1}
            detail = [
                (r.offset, r.headers.get("relay"), r.headers.get("relay_ns"), r.headers["seq"])
                for r in got.get(instrument, [])
                if int(r.headers["seq"]) in twice
            ][:6]
            return (
                False,
                f"{instrument}: {len(seqs)} records, {dup} duplicates {detail}, missing {miss}",
            )
    return True, "ok"


def _wait_exactly_once(cluster: PricingCluster) -> None:
    state = {"why": ""}

    def check() -> bool:
        ok, state["why"] = _exactly_once(cluster)
        return ok

    wait_for(check, CATCH_UP_S, lambda: f"every seq exactly once on prices: {state['why']}")


def _silence(records: list[Record]) -> dict[str, float]:
    out: dict[str, float] = {}
    for instrument, rs in _by_instrument(records).items():
        ts = [r.timestamp_ms for r in rs]
        out[instrument] = max((b - a for a, b in itertools.pairwise(ts)), default=0) / 1000
    return out


def _wait_caught_up(cluster: PricingCluster, group: str) -> None:
    """Wait until ``group`` publishes every instrument within 1 s of the newest seq seen."""

    def caught_up() -> bool:
        newest: dict[str, int] = {}
        mine: dict[str, int] = {}
        for r in cluster.read("raw", idle_s=0.3, live=True):  # the feed is running
            if r.key is None:
                continue
            key, seq = r.key.decode(), int(r.headers["seq"])
            newest[key] = max(newest.get(key, 0), seq)
            if r.headers.get("group") == cluster.group(group):
                mine[key] = max(mine.get(key, 0), seq)
        lag = round(1 / TICK_S)
        return bool(newest) and all(mine.get(k, 0) >= v - lag for k, v in newest.items())

    wait_for(caught_up, 60, f"{group} to catch up")


def _explain(prices: list[Record], instrument: str) -> str:
    """Where an instrument's longest silence was, and who published around it."""
    rs = _by_instrument(prices)[instrument]
    i = max(range(1, len(rs)), key=lambda k: rs[k].timestamp_ms - rs[k - 1].timestamp_ms)
    around = [
        (
            r.headers["seq"],
            r.headers.get("group"),
            r.headers.get("member"),
            r.headers.get("relay"),
            round((int(r.headers.get("publish_ns", "0")) / 1e6 - r.timestamp_ms) / 1000, 3),
        )
        for r in rs[max(0, i - 2) : i + 2]
    ]
    gap = (rs[i].timestamp_ms - rs[i - 1].timestamp_ms) / 1000
    return f"{instrument} silent for {gap:.2f} s at record {i}: {around}"


def test_publisher_faults_leave_prices_exactly_once_without_silence(
    cluster: PricingCluster,
) -> None:
    """Member kill, whole-group loss and a pause upstream: prices has every seq once, no gap."""
    for g in ("p1", "p2"):
        cluster.publisher(g, "a")
        cluster.publisher(g, "b")
    cluster.relay("r1")
    cluster.relay("r2")
    cluster.wait_led(["p1", "p2", "relay"])  # no start-up rebalance inside the measurement
    cluster.feed(instruments=20, rate=1 / TICK_S, duration=10 * S + 6)
    # One fault at a time, each while the other group is healthy (two groups cover one loss).
    time.sleep(2 * S)
    cluster.members["p1-a"].kill()
    cluster.publisher("p1", "c")
    cluster.wait_led(["p1"])
    cluster.members["p2-a"].kill()
    cluster.members["p2-b"].kill()
    time.sleep(S)
    cluster.publisher("p2", "c")
    cluster.wait_led(["p2"])
    _wait_caught_up(cluster, "p2")
    cluster.members["p1-b"].pause()
    time.sleep(2 * S)
    cluster.members["p1-b"].resume()
    end_feed_once_flowing(cluster, "prices", time.time() * 1000 + 1000, timeout_s=120)
    _wait_exactly_once(cluster)
    prices = cluster.read("prices")
    silence = _silence(prices)
    worst = max(silence.values())
    print(f"longest silence on prices under publisher faults: {worst * 1000:.0f} ms")
    assert worst < TICK_S + 1.5, _explain(prices, max(silence, key=lambda i: silence[i]))


def test_relay_kill_and_pause_keep_prices_exactly_once(cluster: PricingCluster) -> None:
    """SIGKILL of a relay, then SIGSTOP past S of another: every seq once; silence bounded."""
    cluster.publisher("p1", "a")
    cluster.publisher("p2", "a")
    r1 = cluster.relay("r1")
    cluster.relay("r2")
    cluster.wait_led(["p1", "p2", "relay"])
    cluster.feed(instruments=12, rate=1 / TICK_S, duration=12 * S + 6)
    time.sleep(3 * S)
    r1.kill()
    time.sleep(3 * S)
    cluster.relay("r3")
    time.sleep(2 * S)
    cluster.members["relay-r2"].pause()
    time.sleep(2 * S)
    cluster.members["relay-r2"].resume()
    # The feed ends once every instrument has flowed again after the last fault: each silence
    # the faults caused has ended by then.
    end_feed_once_flowing(cluster, "prices", time.time() * 1000 + 1000, timeout_s=180)
    _wait_exactly_once(cluster)
    silence = _silence(cluster.read("prices"))
    worst = max(silence.values())
    # A takeover costs S (session expiry) + the rebalance + T (the grace period) + the rebuild
    # (read to an idle end, up to ~2 s) + the backlog; on 2 cores shared by ten processes,
    # allow one more S of delay.
    bound = 4 * S + RELAY_T_S + 4.0
    print(f"longest silence on prices across relay faults: {worst:.2f} s (bound {bound:.1f} s)")
    assert worst < bound


def test_malformed_raw_records_go_to_the_dlq_and_sigterm_hands_over(
    cluster: PricingCluster,
) -> None:
    """Garbage on prices.raw lands in the raw DLQ with a reason; SIGTERM hands over cleanly."""
    from confluent_kafka import Producer

    r1 = cluster.relay("r1")
    cluster.wait_led(["relay"])
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    raw = cluster.topics["raw"]
    producer.produce(raw, key=b"EURUSD", value=b"{not a price", partition=0)
    producer.produce(raw, key=None, value=b"{}", partition=1)
    assert producer.flush(10) == 0
    cluster.publisher("p1", "a")
    cluster.feed(instruments=8, rate=1 / TICK_S, duration=4 * S)

    def dead_lettered() -> bool:
        return len(cluster.read("raw_dlq", idle_s=0.3)) == 2

    wait_for(dead_lettered, 60, "both malformed records in the raw DLQ")
    reasons = {r.headers["reason"] for r in cluster.read("raw_dlq")}
    assert all(reasons), reasons
    assert r1.alive(), "malformed input must not crash the relay"
    cluster.relay("r2")
    time.sleep(S)
    r1.terminate()
    assert r1.wait(30) == 0, "SIGTERM must end the relay cleanly"
    assert cluster.members["feed"].wait(60) == 0
    _wait_exactly_once(cluster)
