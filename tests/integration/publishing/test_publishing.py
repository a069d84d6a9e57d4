"""Price publishing by two disjoint NELI groups, as separate OS processes on a real broker.

Every check is made on the data: the feed's own summary of what it produced against what is on
``prices.raw`` (and the DLQ), with the publishing group and member taken from the headers.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pricing_ha.local.cluster import PricingCluster, Record, by_group, missing
from pricing_ha.local.waiting import wait_for
from tests.integration.feed_end import end_feed_once_flowing

S = PricingCluster.session_ms / 1000
TICK_S = 0.1  # the feed's interval per instrument in these tests (10 Hz)
CATCH_UP_S = 60.0


def _complete(cluster: PricingCluster, groups: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        raw = cluster.read("raw", idle_s=0.5)
        expected = cluster.expected()
        return all(not missing(set(by_group(raw, cluster.group(g))), expected) for g in groups)

    return check


def _incomplete(cluster: PricingCluster, groups: list[str]) -> Callable[[], str]:
    """On timeout: what each group still misses, and each member's state and log."""

    def describe() -> str:
        raw = cluster.read("raw", idle_s=0.5)
        expected = cluster.expected()
        parts = []
        for g in groups:
            gone = missing(set(by_group(raw, cluster.group(g))), expected)
            first: dict[str, int] = {}
            for instrument, seq in gone:
                first[instrument] = min(first.get(instrument, seq), seq)
            parts.append(f"{g} misses {len(gone)} prices; first missing seq: {first}")
            for name, proc in cluster.members.items():
                if name.startswith(f"{g}-"):
                    state = "running" if proc.alive() else f"exited {proc.popen.returncode}"
                    parts.append(f"--- {name} ({state}) log tail:\n{proc.log_tail(25)}")
        return " ".join(groups) + " to publish everything\n" + "\n".join(parts)

    return describe


def _feed_done(cluster: PricingCluster, timeout: float) -> None:
    feed = cluster.members["feed"]
    assert feed.wait(timeout) == 0, feed.log_tail()


def _silences(records: list[Record]) -> dict[str, float]:
    """Per instrument, the longest wait between consecutive seqs' first publication."""
    first: dict[tuple[str, int], int] = {}
    for r in records:
        if r.key is None:
            continue
        k = (r.key.decode(), int(r.headers["seq"]))
        ns = int(r.headers["publish_ns"])
        first[k] = min(first.get(k, ns), ns)
    out: dict[str, float] = {}
    for (instrument, seq), ns in first.items():
        nxt = first.get((instrument, seq + 1))
        if nxt is not None:
            out[instrument] = max(out.get(instrument, 0.0), (nxt - ns) / 1e9)
    return out


def _settled(cluster: PricingCluster, group: str) -> Callable[[], bool]:
    """Whether, in the last second, members a and b of ``group`` both published and no
    partition had two publishers (the group is not in the middle of a rebalance)."""

    def check() -> bool:
        since = time.time_ns() - 1_000_000_000
        by_partition: dict[int, set[str]] = {}
        for r in cluster.read("raw", idle_s=0.3, live=True):  # the feed is running
            if r.headers["group"] == cluster.group(group) and int(r.headers["publish_ns"]) > since:
                by_partition.setdefault(r.partition, set()).add(r.headers["member"])
        members = set().union(*by_partition.values()) if by_partition else set()
        return members == {"a", "b"} and all(len(m) == 1 for m in by_partition.values())

    return check


def test_both_groups_publish_every_quote_byte_identically(cluster: PricingCluster) -> None:
    """P1 and P2 (2 members each) publish every (instrument, seq) of the feed, byte-identical."""
    for g in ("p1", "p2"):
        cluster.publisher(g, "a")
        cluster.publisher(g, "b")
    cluster.feed(instruments=20, rate=1 / TICK_S, duration=8)
    _feed_done(cluster, 60)
    wait_for(_complete(cluster, ["p1", "p2"]), CATCH_UP_S, _incomplete(cluster, ["p1", "p2"]))
    raw = cluster.read("raw")
    p1, p2 = by_group(raw, cluster.group("p1")), by_group(raw, cluster.group("p2"))
    expected = cluster.expected()
    assert len(expected) == 20
    assert sum(expected.values()) >= 20 * 40
    for key in p1.keys() & p2.keys():
        values = {r.value for r in p1[key] + p2[key]}
        assert len(values) == 1, f"{key}: the copies differ: {values}"
    for r in raw:
        assert r.partition == cluster.partition_of(r.key), "a price left its instrument's slice"
    members = {r.headers["member"] for r in raw}
    assert members == {"a", "b"}, "both members of each group should have published"


def test_member_sigkill_group_still_covers_everything(cluster: PricingCluster) -> None:
    """SIGKILL of a P1 member: the survivor takes over and P1's stream has no missing seq."""
    a = cluster.publisher("p1", "a")
    cluster.publisher("p1", "b")
    # Long enough for a slow start: it is ended once every instrument flows again after the kill.
    cluster.feed(instruments=20, rate=1 / TICK_S, duration=4 * S + 60)
    # The victim must be leading something of its own when it dies: under load the group may
    # still be settling after 2 S (read back from prices.raw).
    wait_for(_settled(cluster, "p1"), 60, "p1 to settle with both members publishing")
    killed_ns = time.time_ns()
    a.kill()
    # The feed ends once every instrument has been published again (by the survivor).
    end_feed_once_flowing(cluster, "raw", killed_ns / 1e6 + 1000, timeout_s=120)
    wait_for(_complete(cluster, ["p1"]), CATCH_UP_S, _incomplete(cluster, ["p1"]))
    raw = [r for r in cluster.read("raw") if r.headers["group"] == cluster.group("p1")]
    assert not missing(set(by_group(raw, cluster.group("p1"))), cluster.expected())

    def published(member: str, p: int) -> list[int]:
        return sorted(
            int(r.headers["publish_ns"])
            for r in raw
            if r.partition == p and r.headers["member"] == member
        )

    def led_before_kill(member: str, p: int) -> bool:
        return any(killed_ns - 1_000_000_000 < t < killed_ns for t in published(member, p))

    victims = [
        p
        for p in range(cluster.partitions)
        if led_before_kill("a", p) and not led_before_kill("b", p)
    ]
    assert victims, "the killed member must have been leading something"
    # Non-exclusive takeover: the session expires (S), the group rebalances, the survivor's
    # first heartbeat makes it leader; T (= 2 S) bounds it from above with margin to spare.
    bound_s = S + 2 * S + 3.0
    for p in victims:
        after = [t for t in published("b", p) if t > killed_ns]
        assert after, f"nobody published partition {p} after the kill"
        took = (after[0] - killed_ns) / 1e9
        print(f"partition {p}: the survivor published {took:.2f} s after the kill")
        assert took <= bound_s, f"partition {p} was taken over only after {took:.2f} s"


def test_whole_group_loss_leaves_no_gap_and_restart_catches_up(cluster: PricingCluster) -> None:
    """Losing every P2 member (an AZ): the union has no gap and no silence; P2 catches up."""
    for g in ("p1", "p2"):
        cluster.publisher(g, "a")
        cluster.publisher(g, "b")
    cluster.feed(instruments=20, rate=1 / TICK_S, duration=4 * S + 10)
    time.sleep(2 * S)
    for m in ("a", "b"):
        cluster.members[f"p2-{m}"].kill()
    time.sleep(S)
    cluster.publisher("p2", "c")  # the AZ comes back
    _feed_done(cluster, 120)
    wait_for(_complete(cluster, ["p1", "p2"]), CATCH_UP_S, _incomplete(cluster, ["p1", "p2"]))
    raw = cluster.read("raw")
    union = set(by_group(raw, cluster.group("p1"))) | set(by_group(raw, cluster.group("p2")))
    assert not missing(union, cluster.expected())
    worst = max(_silences(raw).values())
    print(f"longest per-instrument silence on the union: {worst * 1000:.0f} ms")
    assert worst < TICK_S + 1.0, f"an instrument was silent for {worst:.2f} s"


def test_paused_member_overlap_is_bounded(cluster: PricingCluster) -> None:
    """SIGSTOP of a P1 member for 2S: after SIGCONT its overlap with the new leader is bounded."""
    a = cluster.publisher("p1", "a")
    cluster.publisher("p1", "b")
    cluster.feed(instruments=20, rate=1 / TICK_S, duration=6 * S + 6)
    time.sleep(2 * S)
    a.pause()
    time.sleep(2 * S)
    resumed = time.time_ns()
    a.resume()
    _feed_done(cluster, 120)
    wait_for(_complete(cluster, ["p1"]), CATCH_UP_S, _incomplete(cluster, ["p1"]))
    raw = [r for r in cluster.read("raw") if r.headers["group"] == cluster.group("p1")]
    overlap = 0.0
    for p in range(cluster.partitions):
        a_times = [
            int(r.headers["publish_ns"])
            for r in raw
            if r.partition == p
            and r.headers["member"] == "a"
            and int(r.headers["publish_ns"]) >= resumed
        ]
        b_times = [
            int(r.headers["publish_ns"])
            for r in raw
            if r.partition == p
            and r.headers["member"] == "b"
            and int(r.headers["publish_ns"]) >= resumed
        ]
        if a_times and b_times:
            lo, hi = max(min(a_times), min(b_times)), min(max(a_times), max(b_times))
            overlap = max(overlap, (hi - lo) / 1e9)
    print(f"overlap after SIGCONT: {overlap:.2f} s (T = {2 * S:.1f} s)")
    assert overlap <= 2 * S + S + 2.0
    assert not missing(set(by_group(raw, cluster.group("p1"))), cluster.expected())


def test_status_reports_who_leads_what(cluster: PricingCluster) -> None:
    """`pricing-ha status --json` lists each live member of each group and what it leads."""
    import json
    import subprocess

    from pricing_ha.local.cluster import pricing_cli

    for g in ("p1", "p2"):
        cluster.publisher(g, "a")
    cluster.publisher("p1", "b")
    args = [*pricing_cli(), "status", "--json", "--config", str(cluster.config_path)]
    seen: dict[str, set[int]] = {}

    def covered() -> bool:
        out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
        seen.clear()
        for g in json.loads(out.stdout)["groups"]:
            for m in g["members"]:
                seen.setdefault(f"{m['group']}|{m['member']}", set()).update(m["led"])
        p1 = [v for k, v in seen.items() if k.startswith(f"pricing.{cluster.group('p1')}|")]
        p2 = [v for k, v in seen.items() if k.startswith(f"pricing.{cluster.group('p2')}|")]
        every = set(range(cluster.partitions))
        return len(p1) == 2 and set().union(*p1) == every and len(p2) == 1 and p2[0] == every

    wait_for(covered, 60, "status to show both groups covering every partition")
    assert any(k.endswith("/b") for k in seen)
