"""The README's main job, in a short variant: the verdict, its exit status, complete traces."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from pricing_ha.local.cluster import pricing_cli
from pricing_ha.local.demo_report import VERDICT_FILE
from pricing_ha.local.traces_view import RUN_FILE, TraceSet, failovers, terms
from tests.demo_verdict import delivered_verdict


def test_demo_short_run_verdict_and_complete_traces(
    run_demo: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """Every fault injected; exactly once and in order (OK, or DEGRADED with every breach's
    cause named, exit 5); after the run every acquired term has an end or a stated reason,
    and every change of leader is tied to its predecessor's term."""
    result = run_demo("--duration=24", "--instruments=8", timeout=500)
    out = result.stdout
    state, context = delivered_verdict(result)
    assert "availability bound per instrument: 0.70 s = 2 ticks of 100 ms" in out
    if state == "DEGRADED":
        causes = re.findall(r"^ +cause: (.*)$", out, re.MULTILINE)
        assert causes, context
        assert not [c for c in causes if "unexplained" in c], context
    for fault in ("SIGKILL p1-a", "AZ b lost", "SIGKILL relay-", "SIGSTOP p1-b", "SIGCONT p1-b"):
        assert fault in out, f"the demo did not inject {fault!r}"
    demo = tmp_path / "demo"
    assert (demo / "subscriber-summary.json").exists()
    assert "<svg" in (demo / "leadership.html").read_text()
    # Traces are rendered after every process stopped: complete, on the demo's clock.
    assert out.index("every process stopped") < out.index("fail-over traces:")
    assert (demo / "traces" / RUN_FILE).exists()
    traces = TraceSet.load(demo / "traces")
    all_terms = terms(traces)
    unexplained = [(t.group, t.partition, t.member) for t in all_terms if not t.explained]
    assert not unexplained, unexplained
    # Members stopped at the end by SIGTERM recorded the end of every term they held.
    stopped = {
        pid for pid, how in traces.process_ends.items() if how.startswith("stopped at the end")
    }
    still_open = [
        (t.group, t.partition, t.member) for t in all_terms if t.open and t.pid in stopped
    ]
    assert not still_open, still_open
    changes = failovers(traces, all_terms)
    assert {f.group.split("-")[0] for f in changes} >= {"pricing.p1", "pricing.relay"}
    assert all(f.predecessor_term is not None for f in changes)
    tree = (demo / "failovers.txt").read_text()
    assert "├─ predecessor  neli.term" in tree
    assert not re.search(r"takeover +-", tree), "a negative takeover"
    assert "0 of them with no known reason" in tree


@pytest.mark.slow  # three JVMs and the whole pipeline for about 3 minutes: scripts/slow-tests
@pytest.mark.timeout(900)
def test_demo_three_nodes_judges_a_broker_kill_and_the_loss_of_az_a(tmp_path: Path) -> None:
    """`demo --nodes 3`: the busiest broker SIGKILLed and AZ a (broker 1, P1, its relay)
    frozen and healed, both on the verdict's fault timeline and marked on the leadership
    timeline; every price exactly once, in order; any breach names its cause."""
    demo = tmp_path / "demo"
    argv = [*pricing_cli(), "demo", "--nodes", "3", "--duration=40", "--instruments=8"]
    argv += ["--no-live", f"--workdir={demo}"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=840, check=False)
    out = result.stdout
    state, context = delivered_verdict(result)
    assert "Apache Kafka (KRaft, three nodes:" in out, context
    verdict = orjson.loads((demo / VERDICT_FILE).read_bytes())
    assert verdict["state"] == state
    assert verdict["exactly_once_in_order"] is True
    totals = verdict["totals"]
    assert totals["expected"] == totals["delivered"] > 0, totals
    assert totals["duplicates"] == totals["missing"] == totals["out_of_order"] == 0, totals
    faults = {f["text"]: f for f in verdict["faults"]}
    broker = [f for t, f in faults.items() if re.match(r"SIGKILL broker [123] \(rack", t)]
    az = [f for t, f in faults.items() if t.startswith("AZ a lost: SIGSTOP broker 1 and ")]
    assert len(broker) == 1, faults
    assert len(az) == 1, faults
    assert broker[0]["until_s"] > broker[0]["at_s"], "the broker was never restarted"
    assert az[0]["until_s"] > az[0]["at_s"], "AZ a never came back"
    assert "p1-" in az[0]["text"], "no P1 member was in the lost AZ"
    assert "relay-r" in az[0]["text"], "no relay was in the lost AZ"
    for f in (broker[0], az[0]):
        assert f["text"] in out  # in the printed fault timeline as well
    for breach in verdict["breaches"]:
        assert breach["fault"], f"a breach with no cause: {breach}"
    page = (demo / "leadership.html").read_text()
    assert page.count('class="fault" ') >= 2 * len(verdict["faults"])  # P1, P2, relay
    assert f"<li>{broker[0]['text']}" in page
