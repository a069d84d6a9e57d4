"""The demo's verdict line, as the demo tests read it."""

from __future__ import annotations

import re
import subprocess

_VERDICT = re.compile(r"^VERDICT: (OK|DEGRADED|FAILED) .*\(.*; exit (\d)\)$", re.MULTILINE)


def delivered_verdict(result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """Assert that a demo run ended OK or DEGRADED (never FAILED) with the exit status its
    verdict names (0 or 5); returns the state and the output's tail for assertion messages."""
    out = result.stdout
    context = out[-4000:] + result.stderr[-2000:]
    verdict = _VERDICT.search(out)
    assert verdict is not None, context
    state, code = verdict.group(1), int(verdict.group(2))
    assert state != "FAILED", context
    assert result.returncode == code == {"OK": 0, "DEGRADED": 5}[state], context
    assert "every price delivered exactly once, in order" in verdict.group(0), context
    return state, context
