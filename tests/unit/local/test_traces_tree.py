"""pricing-ha traces as an operator reads it: the run's clock, overlaps, inferred links, why
a term has no end, and a tree of spans."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson
import pytest

from pricing_ha.local.traces_tree import render_tree
from pricing_ha.local.traces_view import RUN_FILE, TraceSet, failovers, terms
from tests.trace_runs import T0, Member

GROUP = "pricing.relay"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """r1 leads p0, p1; r2 acquires p0 before r1's term on it ends (an overlap) with a link;
    r3 acquires p1 after r1's revocation with no link (it read none of r1's heartbeats);
    r2 is then killed while leading; the demo's run record says so."""

    async def act() -> None:
        r1, r2, r3 = (Member(tmp_path, GROUP, f"relay/r{n}", partitions=2) for n in "123")
        for m in (r1, r2, r3):
            m.at(1.0)
        await r1.neli.acquire(0, 1)
        meta = r1.neli.heartbeat_meta()
        r2.at(5.0)
        await r2.neli.acquire(0, predecessor=meta)
        r1.at(5.5)
        await r1.neli.revoke(0, 1, reason="rebalance")
        r3.at(12.5)
        await r3.neli.acquire(1)  # no predecessor meta: a planned move, nothing read
        for m in (r1, r3):
            m.telemetry.shutdown()
        r2.telemetry.shutdown()  # r2 "dies" leading p0: its term never ends

    asyncio.run(act())
    member_ids = {}
    for path in tmp_path.glob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            span = orjson.loads(line)
            if span["name"] == "neli.acquired":
                member_ids[span["attributes"]["neli.member.name"]] = span["attributes"][
                    "neli.member.id"
                ]
    record = {
        "t0_wall_ns": int(T0 * 1e9),
        "processes": {str(os.getpid()): {"name": "relay-r2", "end": "SIGKILL (fault) at t=20.0 s"}},
        "heartbeats": {member_ids["relay/r2"]: {"sent_wall_ns": int((T0 + 19.9) * 1e9)}},
    }
    (tmp_path / RUN_FILE).write_bytes(orjson.dumps(record))
    return tmp_path


def test_times_count_from_the_runs_clock(run_dir: Path) -> None:
    """With a run record, t=0 is the demo's, not the first span."""
    traces = TraceSet.load(run_dir)
    assert traces.origin_ns == int(T0 * 1e9)
    assert "t=1.000 s" in render_tree(traces, terms(traces))


def test_an_acquisition_before_the_predecessors_end_is_an_overlap(run_dir: Path) -> None:
    """No negative takeover: the overlap is printed as one, and flagged in an exclusive group."""
    traces = TraceSet.load(run_dir)
    text = render_tree(traces, terms(traces))
    assert "-0." not in text
    assert "overlap  0.500 s: acquired before the predecessor's term ended" in text


def test_a_change_without_a_link_gets_the_partitions_previous_term(run_dir: Path) -> None:
    """r3 read no heartbeat of r1: the change is still listed, inferred and said to be."""
    traces = TraceSet.load(run_dir)
    changes = {f.partition: f for f in failovers(traces)}
    assert (changes[0].predecessor, changes[0].inferred) == ("relay/r1", False)
    assert changes[1].predecessor_term is not None
    assert (changes[1].predecessor_term.member, changes[1].inferred) == ("relay/r1", True)
    assert changes[1].takeover_s == pytest.approx(7.0, abs=1e-6)
    assert "inferred: no heartbeat of the predecessor" in render_tree(traces)


def test_open_terms_state_why_and_when_last_heard_of(run_dir: Path) -> None:
    """A killed member's term names its kill and its last heartbeat; every term is explained."""
    traces = TraceSet.load(run_dir)
    all_terms = terms(traces)
    r2 = next(t for t in all_terms if t.member == "relay/r2")
    assert r2.open
    assert r2.end_note == "process ended: SIGKILL (fault) at t=20.0 s"
    assert (r2.last_seen_ns, r2.last_seen_from) == (int((T0 + 19.9) * 1e9), "last heartbeat")
    text = render_tree(traces, all_terms)
    assert "last heard of t=19.900 s (last heartbeat)" in text


def test_the_tree_is_drawn_with_branches(run_dir: Path) -> None:
    """Terms are branches of the change, their event spans branches of the terms."""
    traces = TraceSet.load(run_dir)
    lines = render_tree(traces, terms(traces)).splitlines()
    i = next(
        n for n, line in enumerate(lines) if line.startswith("hand-over pricing.relay partition 0")
    )
    assert lines[i + 1].startswith("├─ predecessor  neli.term p0  relay/r1")
    assert lines[i + 2].startswith("│  ├─ neli.acquired  t=1.000 s")
    assert lines[i + 3].startswith("│  └─ neli.revoked  t=5.500 s")
    assert lines[i + 4].startswith("├─ successor  neli.term p0  relay/r2")
    assert "<- linked: predecessor term" in lines[i + 5]
