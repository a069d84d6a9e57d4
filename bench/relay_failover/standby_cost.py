"""The relay's standby cost (bench/relay_failover/takeover.py): CPU of the relays, and of a process
running only a standby tail over ``prices``, over the same steady window.

Run as a script, this file is that process: it tails ``prices`` with
:class:`pricing_ha.dedupe.standby.StandbyTail`, catches up (the preload), prints ``measuring``,
measures for the given seconds, then prints its figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STEADY_S = 20.0  # the window over which CPU is measured
_CLK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLK


def steady_costs(
    bootstrap: str, topic: str, partitions: int, relay_pids: dict[str, int]
) -> dict[str, Any]:
    """CPU of each relay over :data:`STEADY_S`, and of a standby tail alone beside them.

    ``window_ms`` is that window on the wall clock (epoch ms), to line it up with records.
    """
    argv = [sys.executable, "-m", "bench.relay_failover.standby_cost", bootstrap, topic]
    probe = subprocess.Popen(
        [*argv, str(partitions), str(STEADY_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert probe.stdout is not None
        # The probe catches up first, then says so: measure the relays over its window.
        if probe.stdout.readline().strip() != "measuring":
            raise RuntimeError("the standby probe did not start measuring")
        before = {r: cpu_s(pid) for r, pid in relay_pids.items()}
        began, began_ms = time.monotonic(), time.time_ns() / 1e6
        out, _ = probe.communicate(timeout=STEADY_S + 60)
        took = time.monotonic() - began
        window_ms = {"from": round(began_ms), "to": round(began_ms + 1000 * took)}
        relay_cpu = {
            r: round(100 * (cpu_s(pid) - before[r]) / took, 2) for r, pid in relay_pids.items()
        }
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    return {
        "relay_cpu_percent_of_a_core": relay_cpu,
        "standby_tail_alone": json.loads(out.strip().splitlines()[-1]),
        "window_ms": window_ms,  # wall clock (epoch ms) of the window the relays' CPU covers
    }


def _probe(bootstrap: str, topic: str, partitions: int, seconds: float) -> None:
    """Tail ``topic`` with a StandbyTail; print ``measuring``, then records and CPU as JSON."""
    from pricing_ha.dedupe.standby import StandbyTail
    from pricing_ha.local.waiting import wait_until

    tail = StandbyTail(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-standby",
            "log.connection.close": False,
        },
        topic,
        partitions,
        token="bench-standby/none",
    )
    tail.start()
    if not wait_until(lambda: tail.problem() is None, 300):
        raise SystemExit(f"the standby tail did not catch up: {tail.problem()}")
    caught_up = resource.getrusage(resource.RUSAGE_SELF)
    records0, began = tail.records, time.monotonic()
    print("measuring", flush=True)
    time.sleep(seconds)  # the measuring window itself
    ru = resource.getrusage(resource.RUSAGE_SELF)
    took = time.monotonic() - began
    records = tail.records - records0
    cpu = ru.ru_utime + ru.ru_stime - caught_up.ru_utime - caught_up.ru_stime
    tail.close()
    figures = {
        "seconds": round(took, 2),
        "records": records,
        "records_per_s": round(records / took, 1),
        "cpu_s": round(cpu, 3),
        "cpu_percent_of_a_core": round(100 * cpu / took, 2),
        "cpu_us_per_record": round(1e6 * cpu / records, 2) if records else None,
        "rss_mib": round(ru.ru_maxrss / 1024, 1),
    }
    print(json.dumps(figures), flush=True)


def main() -> None:
    """The standby-tail process :func:`steady_costs` starts: parse its arguments and measure."""
    parser = argparse.ArgumentParser(description="Tail prices with a StandbyTail; print its cost.")
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("partitions", type=int)
    parser.add_argument("seconds", type=float)
    a = parser.parse_args()
    _probe(a.bootstrap, a.topic, a.partitions, a.seconds)


if __name__ == "__main__":
    main()
