"""CPU time and memory of running processes, from ``/proc``, sampled in a thread.

:class:`ProcSampler` reads ``/proc/<pid>/stat`` (user + system time) and ``/proc/<pid>/status``
(VmRSS, VmHWM) of named processes a few times a second, so that a figure can be taken over any
window afterwards, including for a process that has exited by then (the feed). Its thread is a
:class:`Periodic`, which a benchmark sampling other readings beside these builds on too.
"""

from __future__ import annotations

import abc
import os
import threading
import time
from pathlib import Path

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def load() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (ValueError once it has exited)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        raise ValueError(f"process {pid} has exited")
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def thread_cpu_s(pid: int) -> dict[str, float]:
    """User + system CPU seconds of each thread of a running process, keyed ``"name [tid]"``
    (librdkafka names its threads ``rdk:...``; Python threads carry the process's name)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[f"{name} [{task.name}]"] = (int(fields[11]) + int(fields[12])) * _TICK_S
    return out


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a running process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


class Periodic(abc.ABC):
    """Calls :meth:`sample` every ``interval_s`` in a thread, and once more at :meth:`close`.

    A subclass sets up what :meth:`sample` reads before calling this ``__init__``, which starts
    the thread.
    """

    def __init__(self, interval_s: float, name: str) -> None:
        """Start sampling."""
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @abc.abstractmethod
    def sample(self) -> None:
        """Take one sample now."""

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def close(self) -> None:
        """Take a last sample, then stop."""
        self._stop.set()
        self._thread.join(10)
        self.sample()


class ProcSampler(Periodic):
    """Samples the CPU time and memory of named processes every ``interval_s``, in a thread.

    ``samples`` is a list of (monotonic time, {name: CPU seconds}); ``memory`` holds the last
    reading of each process (for one that has exited: the last one while it ran).
    """

    def __init__(self, pids: dict[str, int], interval_s: float = 0.25) -> None:
        """Start sampling."""
        self.pids = dict(pids)
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.memory: dict[str, dict[str, int]] = {}
        super().__init__(interval_s, "bench-sampler")

    def add(self, name: str, pid: int) -> None:
        """Sample one more process from now on."""
        self.pids = {**self.pids, name: pid}

    def sample(self) -> None:
        """Take one sample now."""
        cpu: dict[str, float] = {}
        for name, pid in self.pids.items():
            try:
                cpu[name] = cpu_s(pid)
                memory = memory_kib(pid)
            except (OSError, ValueError, IndexError):
                continue  # exited
            if "VmRSS" in memory:
                self.memory[name] = memory
        self.samples.append((time.monotonic(), cpu))

    def window(self, lo: float, hi: float) -> dict[str, tuple[float, float, float]]:
        """Per process: (t_a, t_b, CPU seconds from t_a to t_b), where t_a and t_b are the
        first and the last of its samples within [lo, hi] (a process that exits early, the
        feed, has a shorter window); processes sampled fewer than twice there are left out."""
        times: dict[str, list[tuple[float, float]]] = {}
        for t, cpu in list(self.samples):
            if lo <= t <= hi:
                for name, seconds in cpu.items():
                    times.setdefault(name, []).append((t, seconds))
        return {
            name: (s[0][0], s[-1][0], s[-1][1] - s[0][1]) for name, s in times.items() if len(s) > 1
        }
