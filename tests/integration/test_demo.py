"""The README's main job, in a short variant: the demo ends with a clean verdict."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path


def test_demo_short_run_has_a_clean_verdict(
    run_demo: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """The demo injects every fault and still finds each price delivered exactly once."""
    result = run_demo("--duration=24", "--instruments=8", timeout=400)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-2000:]
    assert "VERDICT: OK" in out
    for fault in ("SIGKILL p1-a", "AZ b lost", "SIGKILL relay-", "SIGSTOP p1-b", "SIGCONT p1-b"):
        assert fault in out, f"the demo did not inject {fault!r}"
    assert (tmp_path / "demo" / "subscriber-summary.json").exists()
    assert "fail-over traces:" in out
    html = (tmp_path / "demo" / "leadership.html").read_text()
    assert "<svg" in html
    tree = (tmp_path / "demo" / "failovers.txt").read_text()
    assert "p1-" in tree, "the tree should show the P1 fail-over"
