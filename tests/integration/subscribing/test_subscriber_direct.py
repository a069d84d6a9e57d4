"""`pricing-ha subscribe --direct` (A/B arbitration of prices.raw) across publisher faults.

Judged from the data: the subscriber's JSON lines (every delivered price) and its verdict file,
against the feed's own summary of what it produced.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from pricing_ha.config import load_app_config
from pricing_ha.local.cluster import PricingCluster, by_group, missing
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.publisher import neli_group_id
from pricing_ha.status import read_status

TICK_S = 0.1  # the feed's interval per instrument (10 Hz)
FEED_S = 14.0
S = PricingCluster.session_ms / 1000
INSTRUMENTS = 10


def _groups_lead_everything(cluster: PricingCluster, groups: list[str]) -> bool:
    """Whether each publishing group has members leading every partition."""
    cfg = load_app_config(cluster.config_path)
    members = read_status(cfg, window_s=1.0)
    for g in groups:
        led = {p for m in members if m.group == neli_group_id(cluster.group(g)) for p in m.led}
        if led != set(range(cluster.partitions)):
            return False
    return True


def _lines(log_text: str) -> dict[str, list[dict[str, Any]]]:
    """Instrument -> its deliveries in order, from the subscriber's JSON lines."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in log_text.splitlines():
        if line.startswith('{"instrument"'):
            d = json.loads(line)
            out.setdefault(d["instrument"], []).append(d)
    return out


def _delivered(log_text: str) -> dict[str, list[int]]:
    """Instrument -> seqs in delivery order."""
    return {i: [d["seq"] for d in ds] for i, ds in _lines(log_text).items()}


def _source_silence(lines: dict[str, list[dict[str, Any]]]) -> float:
    """The feed's own longest interval between consecutive quotes of an instrument (s)."""
    return max(
        float(b["source_time_ns"] - a["source_time_ns"]) / 1e9
        for ds in lines.values()
        for a, b in itertools.pairwise(ds)
    )


def test_direct_subscriber_gets_every_seq_once_across_publisher_faults(
    cluster: PricingCluster,
) -> None:
    """A P2 member paused for 2S, then all of P1 SIGKILLed: each seq once, in order, no silence."""
    p1 = cluster.publisher("p1", "a")
    p2a = cluster.publisher("p2", "a")
    cluster.publisher("p2", "b")
    wait_for(lambda: _groups_lead_everything(cluster, ["p1", "p2"]), 60, "both groups to lead")
    verdict = cluster.workdir / "subscriber-summary.json"
    sub = cluster.cli(
        "subscriber",
        "subscribe",
        "--direct",
        "--from-beginning",
        "--json",
        "--duration=180",
        f"--summary-out={verdict}",
    )
    feed = cluster.feed(instruments=INSTRUMENTS, rate=1 / TICK_S, duration=FEED_S)

    def received() -> int:
        return sum(map(len, _delivered(sub.log_path.read_text()).values()))

    per_s = INSTRUMENTS / TICK_S
    wait_for(lambda: received() >= per_s * 1.5, 60, "the subscriber to receive", interval_s=0.05)
    p2a.pause()  # P2 loses a member for 2S; P1 covers while P2 rebalances
    time.sleep(2 * S)
    p2a.resume()
    wait_for(lambda: _groups_lead_everything(cluster, ["p2"]), 60, "P2 to lead everything again")
    p1.kill()  # then the whole of P1 (an AZ) is lost; P2 covers
    assert feed.wait(60) == 0, feed.log_tail()
    expected = cluster.expected()
    total = sum(expected.values())
    wait_for(
        lambda: received() >= total, 60, "the subscriber to receive every seq", interval_s=0.05
    )
    sub.terminate()
    assert sub.wait(30) == 0, sub.log_tail()

    raw = cluster.read("raw")
    from_p1 = by_group(raw, cluster.group("p1"))
    assert from_p1, "P1 should have published before it was killed"
    assert missing(set(from_p1), expected), "P1 was killed before it could publish everything"
    assert not missing(set(by_group(raw, cluster.group("p2"))), expected), "P2 must cover all"

    log_text = sub.log_path.read_text()
    delivered = _delivered(log_text)
    assert len(expected) == INSTRUMENTS
    assert sum(expected.values()) >= INSTRUMENTS * FEED_S / TICK_S * 0.8
    for instrument, last in expected.items():
        assert delivered.get(instrument) == list(range(1, last + 1)), (
            f"{instrument}: not exactly 1..{last} once in order"
        )
    assert set(delivered) == set(expected)

    summary = json.loads(verdict.read_text())
    assert summary["mode"] == "direct"
    assert (summary["gaps"], summary["duplicates"], summary["out_of_order"]) == (0, 0, 0)
    assert summary["invalid"] == 0
    assert summary["ok"] is True
    assert summary["copies_dropped"] > 0, "both groups' copies should have been arbitrated"
    for instrument, last in expected.items():
        row = summary["instruments"][instrument]
        assert (row["first_seq"], row["last_seq"], row["delivered"]) == (1, last, last)
    worst, source_worst = summary["max_silence_s"], _source_silence(_lines(log_text))
    print(
        f"direct subscriber: {summary['delivered']} delivered, {summary['copies_dropped']} "
        f"copies dropped, {summary['switches']} publisher switches, longest silence "
        f"{worst * 1000:.0f} ms (the feed's own: {source_worst * 1000:.0f} ms), "
        f"latency {summary['latency']['publish_to_receive']}"
    )
    # The feed's pacing jitters on a busy machine; what the pipeline adds must stay small.
    assert worst < source_worst + 0.5, f"an instrument was silent for {worst:.2f} s"
    assert worst < TICK_S + 1.0, f"an instrument was silent for {worst:.2f} s"
