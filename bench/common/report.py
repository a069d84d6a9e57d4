"""What every benchmark records beside its figures (machine, code, competing processes), as JSON."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"


def machine() -> dict[str, Any]:
    """A description of the machine the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_gb, 1),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def summary(values: list[float]) -> dict[str, float]:
    """min / median / max / mean of ``values``."""
    return {
        "n": len(values),
        "min": round(min(values), 4),
        "median": round(statistics.median(values), 4),
        "max": round(max(values), 4),
        "mean": round(statistics.fmean(values), 4),
    }


def write(
    name: str,
    figures: dict[str, Any],
    path: Path | None = None,
    *,
    smoke: str | None = None,
    head: dict[str, Any] | None = None,
) -> Path:
    """Write ``figures`` (plus the machine) to bench/results/NAME.json and print them.

    ``path``, when given, is written instead of bench/results/NAME.json. ``smoke`` (why the
    run is too small to report) sends it to a temporary NAME.smoke.json instead, and says so.
    ``head``: top-level entries placed before the machine and the figures (a verdict a reader
    should see first, such as a benchmark's goals).
    """
    doc = {"benchmark": name, **(head or {}), "machine": machine(), "figures": figures}
    if smoke is not None:
        path = Path(tempfile.gettempdir()) / f"{name}.smoke.json"
    path = path if path is not None else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    print(f"written to {path}")
    if smoke is not None:
        print(f"smoke run ({smoke}): nothing written to bench/results")
    return path


def foreign_processes() -> list[str]:
    """Broker, pricing-ha and pytest processes on this machine that this benchmark did not start.

    The machine may be shared (other test runs); their processes compete for the same cores.
    """
    me = os.getpid()
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid = int(proc.name)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        commands[pid] = cmd.strip()

    def mine(pid: int) -> bool:
        while pid > 1:
            if pid == me:
                return True
            pid = parents.get(pid, 1)
        return False

    wanted = ("kafka.Kafka", "pricing-ha", "pytest", "pricing_ha.")
    return sorted(
        f"{pid} {cmd[:120]}"
        for pid, cmd in commands.items()
        if any(w in cmd for w in wanted) and not mine(pid)
    )


def code_version() -> dict[str, object]:
    """The git commit of the working tree and the files that differ from it."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return out.stdout.rstrip("\n")

    changed = [line[3:] for line in git("status", "--porcelain").splitlines()]
    return {"head": git("rev-parse", "--short", "HEAD"), "uncommitted": changed}
