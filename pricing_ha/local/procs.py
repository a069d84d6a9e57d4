"""Supervising the OS processes that the demo, the tests and the benchmarks start.

Every process is started in its own session (so it has its own process group) and is stopped by
PID when its :class:`ProcessGroup` closes, also on failure and at interpreter exit. Faults are
injected for real: SIGKILL, SIGSTOP/SIGCONT, SIGTERM.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

_FROZEN_STATES = frozenset("TtZX")  # stopped (SIGSTOP), stopped by a tracer; or gone


def _thread_states(pid: int) -> list[str] | None:
    """The state letter of every thread of ``pid`` (``/proc``), None where that is not known."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    states = []
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        # "tid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ")".
        end_of_comm = stat.rfind(")")
        states.append(stat[end_of_comm + 2 : end_of_comm + 3])
    return states


def freeze(pid: int, timeout_s: float = 5.0) -> bool:
    """SIGSTOP ``pid`` and wait until every one of its threads has stopped.

    ``kill()`` only queues the signal: the process stops once one of its threads has been
    scheduled to take it and has stopped the others, which on a loaded machine can take long
    enough for another thread to answer a request meanwhile (a fault test then sees a
    "paused" broker serve). Returns whether the stop was seen within ``timeout_s`` (True where
    ``/proc`` is not there to look, or the process ended meanwhile).

    Raises:
        ProcessLookupError: there is no process ``pid`` (as :func:`os.kill`).
    """
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while True:
        states = _thread_states(pid)
        if states is None or all(s in _FROZEN_STATES for s in states):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)


class Proc:
    """One supervised process.

    Attributes:
        name: a label (for logs and verdicts).
        popen: the underlying :class:`subprocess.Popen`.
        log_path: where its stdout and stderr go.
    """

    def __init__(self, name: str, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        """Wrap a started process."""
        self.name = name
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self) -> int:
        """The process id."""
        return self.popen.pid

    def alive(self) -> bool:
        """Whether it is still running (a stopped process counts as running)."""
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: a crash, no clean-up at all."""
        self._signal(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: the process freezes (every thread), as on a VM stall; returns once it has."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                freeze(self.pid)

    def resume(self) -> None:
        """SIGCONT."""
        self._signal(signal.SIGCONT)

    def terminate(self) -> None:
        """SIGTERM: ask for a graceful shutdown."""
        self._signal(signal.SIGTERM)

    def _signal(self, sig: signal.Signals) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def stop(self, grace_s: float = 15.0) -> int | None:
        """Stop by PID: SIGCONT (if paused), SIGTERM, wait ``grace_s``, then SIGKILL.

        Returns:
            The exit code.
        """
        if self.alive():
            self.resume()
            self.terminate()
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
                self.popen.wait(timeout=5)
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for exit and return the exit code."""
        return self.popen.wait(timeout=timeout)

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of its log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ProcessGroup:
    """Starts processes and guarantees they are stopped.

    Use as a context manager; :meth:`close` stops every process still running, by PID.

    Args:
        log_dir: directory for the processes' logs.
    """

    def __init__(self, log_dir: Path) -> None:
        """Create an empty group writing logs to ``log_dir``."""
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[Proc] = []
        atexit.register(self.close)

    def __enter__(self) -> ProcessGroup:
        """Return self."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop everything."""
        self.close()

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        python_module: bool = False,
    ) -> Proc:
        """Start a process.

        Args:
            name: a label; also names its log file.
            argv: the command; with ``python_module`` it is ``[module, *args]`` run with this
                interpreter's ``-m``.
            env: extra environment variables.
            python_module: run ``argv[0]`` as a Python module.
        """
        cmd = [sys.executable, "-m", *argv] if python_module else list(argv)
        log_path = self.log_dir / f"{name}.log"
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                start_new_session=True,
            )
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def close(self, grace_s: float = 15.0) -> None:
        """Stop every process still running (SIGTERM, then SIGKILL after ``grace_s``)."""
        live = [p for p in self.procs if p.alive()]
        for p in live:
            p.resume()
            p.terminate()
        deadline = time.monotonic() + grace_s
        for p in live:
            try:
                p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.popen.wait(timeout=5)
