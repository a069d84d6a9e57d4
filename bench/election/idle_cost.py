"""Idle cost of a process: CPU from ``/proc/PID/stat``, packets and bytes from ``ss -tinp``.

On loopback every TCP segment is one packet, and the kernel counts segments and bytes per
socket (``tcp_info``), so summing a process's sockets gives its own traffic without a network
namespace. Sockets opened and closed inside the window are missed (at idle there are none).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process (all its threads), in clock ticks; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


_USERS = re.compile(r"pid=(\d+)")
_COUNTERS = re.compile(r"\b(segs_out|segs_in|bytes_sent|bytes_received):(\d+)")


def tcp_counters() -> dict[int, dict[str, tuple[int, int]]]:
    """Per PID, per socket (local and peer address): (segments in + out, bytes in + out)."""
    out = subprocess.run(
        ["ss", "-tinpH"], capture_output=True, text=True, check=False, timeout=30
    ).stdout
    found: dict[int, dict[str, tuple[int, int]]] = {}
    pids: list[int] = []
    sock = ""
    for line in out.splitlines():
        if not line[:1].isspace():  # a socket line: state, queues, addresses, users
            parts = line.split()
            sock = " ".join(parts[3:5]) if len(parts) >= 5 else line
            pids = [int(p) for p in _USERS.findall(line)]
            continue
        values = dict.fromkeys(("segs_out", "segs_in", "bytes_sent", "bytes_received"), 0)
        values.update({k: int(v) for k, v in _COUNTERS.findall(line)})
        segs = values["segs_out"] + values["segs_in"]
        nbytes = values["bytes_sent"] + values["bytes_received"]
        for pid in pids:
            found.setdefault(pid, {})[sock] = (segs, nbytes)
    return found


def idle_cost(
    members: dict[str, int], leader: str, server_pid: int, window_s: float
) -> dict[str, Any]:
    """CPU of each member and the server, and each member's packets and bytes, over a window."""
    pids = {**members, "server": server_pid}
    cpu0 = {n: cpu_ticks(p) for n, p in pids.items()}
    net0 = tcp_counters()
    t0 = time.monotonic()
    time.sleep(window_s)
    cpu1 = {n: cpu_ticks(p) for n, p in pids.items()}
    net1 = tcp_counters()
    dt = time.monotonic() - t0

    def cpu_pct(name: str) -> float | None:
        a, b = cpu0[name], cpu1[name]
        return None if a is None or b is None else round((b - a) / CLK_TCK / dt * 100, 2)

    per_member: list[dict[str, Any]] = []
    for name, pid in members.items():
        before, after = net0.get(pid, {}), net1.get(pid, {})
        segs = sum(v[0] - before.get(s, (0, 0))[0] for s, v in after.items())
        nbytes = sum(v[1] - before.get(s, (0, 0))[1] for s, v in after.items())
        per_member.append(
            {
                "member": name,
                "role": "leader" if name == leader else "follower",
                "cpu_pct": cpu_pct(name),
                "packets_per_s": round(segs / dt, 1),
                "bytes_per_s": round(nbytes / dt),
                "sockets": len(after),
            }
        )

    def mean(key: str) -> float | None:
        values = [m[key] for m in per_member if m[key] is not None]
        return round(statistics.fmean(values), 2) if values else None

    return {
        "window_s": round(dt, 2),
        "member_cpu_pct_mean": mean("cpu_pct"),
        "member_packets_per_s_mean": mean("packets_per_s"),
        "member_bytes_per_s_mean": mean("bytes_per_s"),
        "server_cpu_pct": cpu_pct("server"),
        "members": per_member,
    }
