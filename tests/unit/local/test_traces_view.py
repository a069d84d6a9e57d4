"""pricing-ha traces: terms, fail-over trees and the HTML timeline, from synthetic span files.

The span files are written the way the processes write them: neli's leadership tracing on fake
members, through the application's telemetry set-up, one JSON-lines file per "process".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pricing_ha.cli import app
from pricing_ha.local.traces_chart import write_trace_report
from pricing_ha.local.traces_tree import render_tree
from pricing_ha.local.traces_view import (
    TraceSet,
    failovers,
    switches,
    terms,
)
from tests.trace_runs import P1, T0, write_run


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run: P1/a dies leading p0, p1; P1/b takes over; p2 is handed from b to c; one switch."""
    return write_run(tmp_path)


def test_terms_cover_every_group_partition_and_member(run_dir: Path) -> None:
    """Open terms of a killed member end at the takeover; ended terms keep their loss."""
    all_terms = terms(TraceSet.load(run_dir))
    got = {(t.group, t.partition, t.member, t.open) for t in all_terms}
    assert got == {
        (P1, 0, "p1/a", True),
        (P1, 1, "p1/a", True),
        (P1, 2, "p1/b", False),
        (P1, 0, "p1/b", True),
        (P1, 1, "p1/b", True),
        (P1, 2, "p1/c", True),
        ("pricing.relay", 0, "relay/r1", True),
        ("pricing.relay", 1, "relay/r1", True),
        ("pricing.relay", 2, "relay/r1", True),
    }
    a0 = next(t for t in all_terms if t.member == "p1/a" and t.partition == 0)
    assert a0.drawn_end_ns == int((T0 + 8.0) * 1e9)  # b's acquisition, which links to it
    b2 = next(t for t in all_terms if t.member == "p1/b" and t.partition == 2)
    assert (b2.end_kind, b2.end_reason) == ("revoked", "rebalance")
    assert b2.end_ns == int((T0 + 9.0) * 1e9)


def test_failover_tree_links_the_right_predecessor_and_takeover(run_dir: Path) -> None:
    """Each acquisition names its predecessor's term; takeovers count from its last sign."""
    traces = TraceSet.load(run_dir)
    changes = {(f.group, f.partition): f for f in failovers(traces)}
    assert set(changes) == {(P1, 0), (P1, 1), (P1, 2)}
    for p in (0, 1):
        f = changes[(P1, p)]
        assert (f.predecessor, f.successor, f.kind) == ("p1/a", "p1/b", "fail-over")
        assert f.predecessor_term is not None
        assert f.predecessor_term.member == "p1/a"
        assert f.predecessor_term.partition == p
        assert f.takeover_s == pytest.approx(8.0 - 4.8, abs=1e-6)
    handover = changes[(P1, 2)]
    assert (handover.predecessor, handover.successor, handover.kind) == (
        "p1/b",
        "p1/c",
        "hand-over",
    )
    assert handover.takeover_s == pytest.approx(0.2, abs=1e-6)
    text = render_tree(traces)
    assert "fail-over pricing.p1 partition 0: p1/a -> p1/b" in text
    assert "hand-over pricing.p1 partition 2: p1/b -> p1/c" in text
    assert "no end recorded (no record of how its process ended)" in text
    assert "takeover  3.200 s after the predecessor was last heard of" in text
    assert "relay.switch EURUSD (partition 1)" in text
    assert "p1/a -> p2/a: silence 350 ms, gap 0 seq, 7 duplicate(s) dropped before" in text


def test_switches_are_read_back_with_their_attributes(run_dir: Path) -> None:
    """A relay.switch span comes back with from/to, gap, silence, duplicates and partition."""
    (w,) = switches(TraceSet.load(run_dir))
    assert (w.instrument, w.partition, w.source_from, w.source_to) == ("EURUSD", 1, "p1/a", "p2/a")
    assert (w.gap_seq, w.silence_s, w.duplicates_dropped, w.observer) == (0, 0.35, 7, "r1")
    assert w.at_ns == int((T0 + 8.1) * 1e9)


def test_html_timeline_is_self_contained_and_shows_each_group_partition_member(
    run_dir: Path, tmp_path: Path
) -> None:
    """One chart per group, a row per partition, a bar per term, no external assets."""
    out = tmp_path / "out" / "leadership.html"
    lines: list[str] = []
    assert write_trace_report(run_dir, out, echo=lines.append) == out
    assert lines[-1] == f"leadership timeline: {out}"
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    for group in (P1, "pricing.relay"):
        assert f'data-group="{group}"' in page
    bars = re.findall(r'data-member="([^"]+)" data-partition="(\d)"', page)
    assert sorted(set(bars)) == sorted(
        {("p1/a", "0"), ("p1/a", "1"), ("p1/b", "0"), ("p1/b", "1"), ("p1/b", "2")}
        | {("p1/c", "2"), ("relay/r1", "0"), ("relay/r1", "1"), ("relay/r1", "2")}
    )
    assert page.count("partition 2</text>") == 2  # in the P1 chart and the relay chart
    assert 'data-instrument="EURUSD"' in page
    assert not re.search(r"<script|<link|<img|src=|href=\"(?!#)", page)  # in-page links only
    names = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}  # namespaces
    assert set(re.findall(r"https?://[^\"']+", page)) == names


def test_traces_command_prints_the_tree_and_the_html_path(run_dir: Path, tmp_path: Path) -> None:
    """`pricing-ha traces DIR --out PATH` prints the fail-overs and where the chart is."""
    out = tmp_path / "chart.html"
    result = CliRunner().invoke(app, ["traces", str(run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 leadership change(s)" in result.output
    assert f"leadership timeline: {out}" in result.output
    assert out.exists()
    missing = CliRunner().invoke(app, ["traces", str(tmp_path / "nope")])
    assert missing.exit_code == 1


def test_html_timeline_marks_every_fault_of_the_run_record(run_dir: Path, tmp_path: Path) -> None:
    """The run record's faults are listed and drawn on each group's chart where they struck
    (a band over a lasting one), on the run's clock."""
    from pricing_ha.local.demo_report import RunRecord
    from pricing_ha.local.verdict import Fault

    faults = [
        Fault(4.8, "SIGKILL broker 2 (rack b)", until_s=7.0),
        Fault(8.5, "AZ a lost: SIGSTOP broker 1 and p1-b, relay-r1", until_s=9.5),
        Fault(9.1, "SIGKILL p1-a"),
    ]
    RunRecord(int(T0 * 1e9), 0.0, faults=faults).write(run_dir)
    out = tmp_path / "leadership.html"
    write_trace_report(run_dir, out, echo=lambda _line: None)
    page = out.read_text()
    assert "<li>SIGKILL broker 2 (rack b) (t=4.8-7.0 s)</li>" in page
    assert "<li>AZ a lost: SIGSTOP broker 1 and p1-b, relay-r1 (t=8.5-9.5 s)</li>" in page
    lines = re.findall(
        r'class="fault" data-at-s="[^"]+">\s*<title>([^<]+)</title>\s*<path d="M ([\d.]+) ', page
    )
    bands = re.findall(r'class="fault-band" data-at-s="[^"]+">\s*<title>([^<]+)</title>', page)
    assert len(lines) == 3 * 2  # every fault, on the P1 chart and on the relay's
    assert sorted(bands) == sorted([faults[0].describe(), faults[1].describe()] * 2)
    x = {title: float(x1) for title, x1 in lines}  # where each is drawn
    assert x[faults[0].describe()] < x[faults[1].describe()] < x[faults[2].describe()]
