"""Both publishing groups ride through a broker (group coordinator) stall.

The two groups share the cluster and its coordinator: a stall longer than the session timeout S
must not revoke both at once. Each test pauses a broker of its own (SIGSTOP) while both groups
publish, and judges from the data: on the union of ``prices.raw``, every instrument is published
again within 1 s of SIGCONT (``publish_ns`` of the first price published after it), and
``prices`` carries every seq exactly once, in order.
"""

from __future__ import annotations

import time

import pytest

from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster, Record
from pricing_ha.local.waiting import wait_for
from tests.integration.feed_end import end_feed_once_flowing

TICK_S = 0.1
RESUME_BOUND_S = 1.0
# The feed runs this long past its schedule: it must still be quoting every instrument well after
# the last SIGCONT on a loaded machine (end_feed_once_flowing ends it as soon as it has).
FEED_SLACK_S = 60.0


@pytest.fixture
def bootstrap(own_broker: LocalKafka) -> str:
    """This module's clusters run on a broker of their own, which the tests pause."""
    return own_broker.bootstrap


def _first_publications_after(raw: list[Record], at_ns: int) -> dict[str, float]:
    """Per instrument, seconds from ``at_ns`` to its first price published after it (union)."""
    out: dict[str, float] = {}
    for r in raw:
        if r.key is None:
            continue
        ns = int(r.headers["publish_ns"])
        if ns >= at_ns:
            instrument = r.key.decode()
            out[instrument] = min(out.get(instrument, float("inf")), (ns - at_ns) / 1e9)
    return out


def _per_group_after(raw: list[Record], at_ns: int, instrument: str) -> dict[str, float]:
    """Per ``group/member``, seconds from ``at_ns`` to its first ``instrument`` price after it."""
    out: dict[str, float] = {}
    for r in raw:
        ns = int(r.headers["publish_ns"])
        if r.key == instrument.encode() and ns >= at_ns:
            who = f"{r.headers['group']}/{r.headers['member']}"
            out[who] = min(out.get(who, float("inf")), (ns - at_ns) / 1e9)
    return out


def _exactly_once_in_order(cluster: PricingCluster) -> str | None:
    """Why ``prices`` is not every expected seq once and in order (None when it is)."""
    expected = cluster.expected()
    seqs: dict[str, list[int]] = {}
    for r in sorted(cluster.read("prices", idle_s=0.5), key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        seqs.setdefault(r.key.decode(), []).append(int(r.headers["seq"]))
    for instrument, last in expected.items():
        got = seqs.get(instrument, [])
        if got != list(range(1, last + 1)):
            return f"{instrument}: {len(got)} of {last}, first wrong at {_first_wrong(got)}"
    return None


def _first_wrong(got: list[int]) -> int:
    return next((i for i, s in enumerate(got) if s != i + 1), len(got))


def _start(cluster: PricingCluster, feed_s: float) -> None:
    for g in ("p1", "p2"):
        cluster.publisher(g, "a")
        cluster.publisher(g, "b")
    cluster.relay("r1")
    cluster.wait_led(["p1", "p2", "relay"])
    cluster.feed(instruments=12, rate=1 / TICK_S, duration=feed_s)


def _stall(broker: LocalKafka, seconds: float) -> int:
    """Pause the broker for ``seconds``; returns the SIGCONT time (ns)."""
    broker.pause()
    try:
        time.sleep(seconds)  # the fault's duration, not a wait for a condition
    finally:
        broker.resume()
    return time.time_ns()


def _judge(cluster: PricingCluster, resumed_ns: list[int]) -> None:
    # The feed ends once the union has flowed again for a second after the last SIGCONT
    # (the bound is 1 s), or on its own.
    since_ms = max(resumed_ns) / 1e6 + 1000 * (RESUME_BOUND_S + 1)
    end_feed_once_flowing(cluster, "raw", since_ms, timeout_s=120)
    state = {"why": ""}

    def complete() -> bool:
        state["why"] = _exactly_once_in_order(cluster) or ""
        return not state["why"]

    wait_for(complete, 90, lambda: f"prices exactly once and in order: {state['why']}")
    raw = cluster.read("raw")
    worst_by_stall = []
    for at_ns in resumed_ns:
        delays = _first_publications_after(raw, at_ns)
        assert set(delays) == set(cluster.expected()), "an instrument never resumed"
        slowest = max(delays, key=lambda i: delays[i])
        worst_by_stall.append((delays[slowest], slowest, at_ns))
    print("union resumed after SIGCONT (worst instrument per stall):", worst_by_stall)
    seconds, instrument, at_ns = max(worst_by_stall)
    assert seconds <= RESUME_BOUND_S, (
        f"{instrument} resumed only {seconds:.2f} s after SIGCONT; first price per member: "
        f"{_per_group_after(raw, at_ns, instrument)}"
    )


@pytest.mark.parametrize(
    "factors",
    [
        pytest.param((1,), id="S"),
        # Known to fail about one run in five, also on a quiet machine: after a stall of 2·S or
        # 4·S a publisher's quote consumer can lose its group coordinator for up to 20 s (its
        # committed offsets unknown, so it cannot start the partitions it was given), and a
        # relay's NELI member once did not rejoin its group at all. Open under the broker-fault
        # issue; the slow suite keeps it honest meanwhile.
        pytest.param((1, 2, 4), id="S-2S-4S", marks=pytest.mark.slow),
    ],
)
def test_broker_stalls_of_session_multiples(
    cluster: PricingCluster, own_broker: LocalKafka, factors: tuple[int, ...]
) -> None:
    """Broker paused for S (then 2·S, 4·S): the union resumes within 1 s after each SIGCONT."""
    s = cluster.session_ms / 1000
    settle = 2 * s
    _start(cluster, feed_s=(settle + s) * sum(factors) + 2 * settle + FEED_SLACK_S)
    resumed = []
    for factor in factors:
        time.sleep(settle)  # steady publishing before the fault
        resumed.append(_stall(own_broker, factor * s))
    _judge(cluster, resumed)


def test_stall_with_one_group_killed_meanwhile(
    cluster: PricingCluster, own_broker: LocalKafka
) -> None:
    """P2 dies during a 2S broker stall: P1, which kept its leadership, covers at SIGCONT."""
    s = cluster.session_ms / 1000
    _start(cluster, feed_s=2 * s + 2 * s + FEED_SLACK_S)
    time.sleep(2 * s)
    own_broker.pause()
    try:
        time.sleep(s)
        for m in ("a", "b"):
            cluster.members[f"p2-{m}"].kill()
        time.sleep(s)
    finally:
        own_broker.resume()
    _judge(cluster, [time.time_ns()])
