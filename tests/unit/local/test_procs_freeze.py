"""Pausing a process (SIGSTOP) returns only once every one of its threads has stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pricing_ha.local.procs import _thread_states, freeze
from pricing_ha.local.waiting import wait_for

# Four threads spinning on the CPU: the signal must stop all of them, not only the one that
# takes it.
_BUSY = """
import threading
def spin():
    while True:
        pass
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
spin()
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")


def test_freeze_returns_with_every_thread_stopped_and_sigcont_runs_them_again() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        states = _thread_states(proc.pid)
        assert states is not None
        assert len(states) == 4
        assert any(s == "R" for s in states)
        assert freeze(proc.pid) is True
        # Read right after the return: no thread may still be running.
        assert set(_thread_states(proc.pid) or ["?"]) <= {"T", "t"}
        proc.send_signal(signal.SIGCONT)
        # Runnable again: the spinning threads leave the stopped state.
        wait_for(
            lambda: not set(_thread_states(proc.pid) or []) & {"T", "t"},
            5,
            lambda: f"the threads to run after SIGCONT: {_thread_states(proc.pid)}",
            interval_s=0.001,
        )
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_freeze_of_a_process_that_is_gone_fails_as_kill_does() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(10)  # reaped: no such pid any more
    with pytest.raises(ProcessLookupError):
        freeze(proc.pid, timeout_s=0.5)
