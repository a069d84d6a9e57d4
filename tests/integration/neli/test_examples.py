"""The runnable examples (``examples/``) against a real broker, and their pure parts."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from neli import Mode, Neli, NeliConfig, OwnerLookup, Variant
from neli.wire import Heartbeat, OwnerDirectory
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.waiting import wait_for, wait_for_async
from tests.integration.neli_harness import SESSION_MS, member_config


def _hb(member: str, led: tuple[int, ...], sent_wall: float, group: str = "g") -> Heartbeat:
    return Heartbeat(
        group=group,
        member_id=f"{member}/1",
        member_name=member,
        incarnation=0,
        counter=int(sent_wall * 10),
        sent_mono=sent_wall,
        sent_wall=sent_wall,
        led=led,
    )


def test_owner_directory_claims_since_and_staleness() -> None:
    """Claims name the leader since its first unbroken heartbeat and expire after max_age."""
    d = OwnerDirectory(partitions=4, max_age_s=1.0)
    d.observe(_hb("a", (0, 1), 100.0))
    d.observe(_hb("a", (0, 1), 100.5))
    d.observe(_hb("b", (2,), 100.5))
    d.observe(_hb("b", (2,), 100.5, group="other"))
    assert [(o.member_name, o.since_wall) for o in d.partition_owners("g", 0, 100.6)] == [
        ("a", 100.0)
    ]
    assert [o.member_name for o in d.partition_owners("g", 2, 100.6)] == ["b"]
    # A heartbeat that stops listing a partition ends that claim at once.
    d.observe(_hb("a", (1,), 101.0))
    assert d.partition_owners("g", 0, 101.0) == []
    # A claim not renewed for max_age is dropped; a later one starts a new run.
    assert d.partition_owners("g", 1, 102.1) == []
    d.observe(_hb("a", (1,), 103.0))
    assert [o.since_wall for o in d.partition_owners("g", 1, 103.0)] == [103.0]


async def test_owner_lookup_matches_each_members_own_answer(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Any
) -> None:
    """The lookup names exactly the member whose leads() is true, and follows a fail-over."""
    m = 4
    topic, group = topic_factory(m), unique_name("g")

    def config(name: str) -> NeliConfig:
        return member_config(
            bootstrap, topic, group, name, variant=Variant.FAST, mode=Mode.EXCLUSIVE
        )

    lookup = OwnerLookup(bootstrap, topic)
    await lookup.start()
    a, b = Neli(config("a")), Neli(config("b"))
    members = [a, b]
    try:
        await a.start()
        await b.start()

        def agrees() -> bool:
            assert lookup.directory is not None
            now = time.time()
            for p in range(m):
                named = {o.member_id for o in lookup.directory.partition_owners(group, p, now)}
                leading = {x.member_id for x in members if x.leads(p)}
                if named != leading or len(leading) != 1:
                    return False
            return True

        await wait_for_async(agrees, 60, "lookup agrees with every member's leads()")
        assert a.led_partitions(), "both members should lead something"
        assert b.led_partitions(), "both members should lead something"
        for key in ("EURUSD", "AAPL", "SYM007"):
            (owner,) = lookup.owners(group, key)
            assert owner.member_id == (a if a.is_leader(key) else b).member_id
            assert owner.since_wall <= owner.last_seen_wall <= time.time() + 1
        await a.close()
        members = [b]
        await wait_for_async(agrees, 60, "lookup follows the fail-over to b")
        assert all(lookup.owners(group, k)[0].member_id == b.member_id for k in ("X", "Y"))
    finally:
        for x in (a, b):
            await x.close()
        await lookup.close()


def _runs(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow  # about 80 s: in ./scripts/slow-tests, to keep CI within its budget
def test_global_timer_runs_each_period_once_through_kill_and_pause(
    procs: ProcessGroup, bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    """Across three processes no two runs overlap, and each fault skips at most one period."""
    s = SESSION_MS / 1000
    period = 3 * s  # above the takeover time: S + a rebalance + the grace period T
    topic, group = topic_factory(3), f"timer-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "timer.jsonl"
    members = {
        name: procs.spawn(
            name,
            [
                "examples.global_timer",
                f"--bootstrap={bootstrap}",
                f"--topic={topic}",
                f"--group={group}",
                f"--name={name}",
                f"--log={log}",
                f"--period-s={period}",
                "--job-s=0.2",
                f"--session-ms={SESSION_MS}",
            ],
            python_module=True,
        )
        for name in ("t1", "t2", "t3")
    }

    def after(n: int) -> Callable[[], bool]:
        return lambda: len(_runs(log)) >= n

    def diagnostics() -> str:
        return "\n".join(f"--- {n}\n{p.log_tail(10)}" for n, p in members.items())

    wait_for(after(2), 8 * period, lambda: f"two runs\n{diagnostics()}")
    # Kill the owner right after a run (not during one: see the example's docstring).
    n = len(_runs(log))
    wait_for(after(n + 1), 2 * period, "the next run")
    killed = _runs(log)[-1]["name"]
    members[killed].kill()
    n = len(_runs(log))
    wait_for(after(n + 2), 5 * period, lambda: f"two runs after the kill\n{diagnostics()}")
    # Pause the new owner right after a run for longer than its session, then let it go on.
    n = len(_runs(log))
    wait_for(after(n + 1), 2 * period, "the next run")
    paused = _runs(log)[-1]["name"]
    members[paused].pause()
    time.sleep(s + 4)
    members[paused].resume()
    n = len(_runs(log))
    wait_for(after(n + 2), 5 * period, lambda: f"two runs after the pause\n{diagnostics()}")

    runs = sorted(_runs(log), key=lambda r: r["start"])
    periods = [r["k"] for r in runs]
    assert len(set(periods)) == len(periods), f"a period ran twice: {runs}"
    assert periods == sorted(periods), runs
    for a, b in itertools.pairwise(runs):
        assert b["start"] >= a["end"], f"overlapping runs: {a} {b}"
    gaps = [b - a for a, b in itertools.pairwise(periods)]
    assert max(gaps) <= 2, f"more than one period skipped at once: {periods}"
    assert sum(g - 1 for g in gaps) <= 2, f"more skipped periods than faults (2): {periods}"
    assert {r["name"] for r in runs} >= {killed, paused}
