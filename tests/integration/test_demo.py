"""The README's main job, in a short variant: the demo ends with a clean verdict."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pricing_ha.local.cluster import pricing_cli


def test_demo_short_run_has_a_clean_verdict(bootstrap: str, tmp_path: Path) -> None:
    """The demo injects every fault and still finds each price delivered exactly once."""
    result = subprocess.run(
        [
            *pricing_cli(),
            "demo",
            f"--bootstrap={bootstrap}",
            "--duration=24",
            "--instruments=8",
            "--no-live",
            f"--workdir={tmp_path / 'demo'}",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
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
