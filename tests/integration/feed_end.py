"""Ending a test's feed as soon as what the test judges has been recorded.

A fault test starts the feed for a fixed duration long enough for its whole schedule on a slow
machine, so on a normal run the feed goes on well after the last fault has played out. The
test only needs every instrument to have flowed again after a given moment: every silence that
began before it has then ended, so the rest of the feed would add time to the run and nothing
to the verdict. :func:`end_feed_once_flowing` stops the feed there (SIGTERM: it stops between
quotes, waits for its deliveries and writes its summary, so the expected seqs stay exact).
"""

from __future__ import annotations

from typing import Any

from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.waiting import wait_for


def end_feed_once_flowing(
    cluster: PricingCluster, role: str, since_ms: float, timeout_s: float = 90.0
) -> None:
    """Wait until each instrument of the feed has a record on the topic of ``role`` (``"raw"``,
    ``"prices"``) timestamped after ``since_ms`` (wall clock), then end the feed cleanly.
    Fails if that does not happen within ``timeout_s``, or if the feed fails."""
    feed = cluster.members["feed"]
    instruments = cluster.fed_instruments
    state: dict[str, Any] = {"behind": "", "flowing": False}

    def flowing() -> bool:
        latest: dict[bytes, int] = {}
        for r in cluster.read(role, idle_s=0.3, live=True):
            if r.key is not None:
                latest[r.key] = max(latest.get(r.key, 0), r.timestamp_ms)
        behind = sorted(k.decode() for k, ts in latest.items() if ts <= since_ms)
        state["behind"] = f"{len(latest)} of {instruments} seen, not since: {behind[:5]}"
        every_one = len(latest) == instruments and not behind
        state["flowing"] = every_one
        return every_one

    def what() -> str:
        return f"every instrument flowing on {role} again: {state['behind']}"

    if feed.alive():
        wait_for(lambda: not feed.alive() or flowing(), timeout_s, what)
        feed.terminate()
    assert feed.wait(60) == 0, feed.log_tail()
    if not state["flowing"]:  # a feed that ended on its own: the relay may still be catching up
        wait_for(flowing, timeout_s, what)
