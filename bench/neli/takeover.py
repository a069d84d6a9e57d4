"""Takeover time after SIGKILL: how long a killed member's partitions stay without a leader.

For each variant/mode: three members (separate processes) on a 4-partition topic of a local
Apache Kafka; repeatedly SIGKILL the member leading the most partitions, measure for each of
its partitions the time from the kill to the first instant a survivor leads it (from the
survivors' own records), then start a replacement. Prints and writes min/median/max.

Run: ``.venv/bin/python -m bench.neli [--rounds 10] [--session-ms 3000]``
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common.report import summary, write
from pricing_ha.local import leadership_log
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.waiting import wait_until

M = 4
CASES = [("full", "non-exclusive"), ("full", "exclusive"), ("fast", "exclusive")]


def _led_now(workdir: Path, name: str) -> set[int]:
    log = leadership_log.load(workdir / f"{name}.jsonl", name)
    end = log.last_seen or 0.0
    return {p for p, runs in log.runs.items() if runs and runs[-1][1] >= end}


def _taken_over(workdir: Path, survivors: list[str], parts: set[int]) -> bool:
    """Whether the survivors between them lead every partition of ``parts``."""
    return set[int]().union(*(_led_now(workdir, n) for n in survivors)) >= parts


def run_case(bootstrap: str, variant: str, mode: str, rounds: int, session_ms: int) -> list[float]:
    """Kill and replace a member ``rounds`` times; return the takeover times (seconds)."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-takeover-"))
    topic = group = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, M, 1)])[topic].result(timeout=15)
    live: dict[str, Proc] = {}
    takeovers: list[float] = []
    counter = 0
    with ProcessGroup(workdir / "logs") as procs:

        def spawn() -> None:
            nonlocal counter
            counter += 1
            name = f"m{counter}"
            live[name] = procs.spawn(
                name,
                [
                    "pricing_ha.local.probe",
                    f"--bootstrap={bootstrap}",
                    f"--topic={topic}",
                    f"--group={group}",
                    f"--name={name}",
                    f"--out={workdir / (name + '.jsonl')}",
                    f"--variant={variant}",
                    f"--mode={mode}",
                    f"--session-ms={session_ms}",
                ],
                python_module=True,
            )

        for _ in range(3):
            spawn()
        for i in range(rounds):
            ok = wait_until(
                lambda: (
                    set().union(*(_led_now(workdir, n) for n in live)) == set(range(M))
                    and all(_led_now(workdir, n) for n in live)
                ),
                90,
                poll_s=0.05,
            )
            if not ok:
                print(f"  round {i}: group did not settle; skipping", flush=True)
                continue
            time.sleep(1.0)
            victim = max(live, key=lambda n: len(_led_now(workdir, n)))
            parts = _led_now(workdir, victim)
            killed_at = time.monotonic()
            live.pop(victim).kill()
            survivors = list(live)
            wait_until(functools.partial(_taken_over, workdir, survivors, parts), 60, poll_s=0.05)
            logs = [leadership_log.load(workdir / f"{n}.jsonl", n) for n in survivors]
            times = [leadership_log.first_led_after(logs, p, killed_at) for p in parts]
            if any(t is None for t in times):
                print(f"  round {i}: not taken over within 60 s", flush=True)
                continue
            worst = max(t - killed_at for t in times if t is not None)
            takeovers.append(worst)
            print(f"  {variant}/{mode} round {i}: {sorted(parts)} taken over in {worst:.2f} s")
            spawn()
    return takeovers


def main() -> None:
    """Run every case and write bench/results/neli_takeover.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--session-ms", type=int, default=3000)
    args = parser.parse_args()
    figures: dict[str, object] = {"session_timeout_ms": args.session_ms, "partitions": M}
    with LocalKafka() as broker:
        for variant, mode in CASES:
            times = run_case(broker.bootstrap, variant, mode, args.rounds, args.session_ms)
            figures[f"{variant}/{mode}"] = summary(times) if times else {"n": 0}
    write("neli_takeover", figures)


if __name__ == "__main__":
    main()
