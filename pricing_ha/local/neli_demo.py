"""A live demonstration of NELI: members in separate processes, one killed, leadership moving.

Starts a local Apache Kafka (unless a bootstrap address is given), creates a NELI topic, starts
several members of one non-exclusive group as separate OS processes, shows who leads which
partition, SIGKILLs the busiest member, shows its partitions being taken over, and ends with a
verdict computed from what the members recorded.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pricing_ha.local import leadership_log
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.procs import ProcessGroup


@dataclass(frozen=True)
class NeliDemoResult:
    """What the demo measured."""

    takeover_s: dict[int, float]
    bound_s: float
    uncovered_before_kill: dict[int, list[tuple[float, float]]]

    @property
    def ok(self) -> bool:
        """Every partition was led before the kill and taken over within the bound after it."""
        return not any(self.uncovered_before_kill.values()) and all(
            t <= self.bound_s for t in self.takeover_s.values()
        )


def _table(led: dict[str, set[int]], partitions: int, elapsed: float, note: str) -> str:
    cells = []
    for p in range(partitions):
        owners = [name for name, parts in led.items() if p in parts]
        cells.append(f"p{p}:{'+'.join(owners) or '-':<6}")
    return f"[{elapsed:5.1f}s] " + " ".join(cells) + (f"   {note}" if note else "")


def run_neli_demo(
    *,
    bootstrap: str | None = None,
    members: int = 3,
    partitions: int = 6,
    session_ms: int = 3000,
    settle_s: float = 4.0,
    after_kill_s: float = 12.0,
    out: Callable[[str], None] = print,
) -> NeliDemoResult:
    """Run the demonstration and return its measurements."""
    workdir = Path(tempfile.mkdtemp(prefix="neli-demo-"))
    broker = None if bootstrap else LocalKafka()
    with ProcessGroup(workdir / "logs") as procs:
        try:
            if broker is not None:
                broker.start()
                bootstrap = broker.bootstrap
                out(f"Apache Kafka (KRaft, one node) on {bootstrap}, pid {broker.pid}")
            assert bootstrap is not None
            topic, group = f"neli-demo-{uuid.uuid4().hex[:8]}", "neli-demo"
            _create_topic(bootstrap, topic, partitions)
            names = [f"m{i + 1}" for i in range(members)]
            for name in names:
                procs.spawn(
                    name,
                    [
                        "pricing_ha.local.probe",
                        f"--bootstrap={bootstrap}",
                        f"--topic={topic}",
                        f"--group={group}",
                        f"--name={name}",
                        f"--out={workdir / (name + '.jsonl')}",
                        f"--session-ms={session_ms}",
                    ],
                    python_module=True,
                )
            out(f"{members} members of group {group!r}, topic {topic!r} ({partitions} partitions)")
            run = _Run(procs, names, workdir, partitions, session_ms / 1000, out)
            return _observe(run, settle_s, after_kill_s)
        finally:
            procs.close()
            if broker is not None:
                broker.stop()


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=15)


@dataclass(frozen=True)
class _Run:
    procs: ProcessGroup
    names: list[str]
    workdir: Path
    partitions: int
    session_s: float
    out: Callable[[str], None]


def _led_now(workdir: Path, name: str) -> set[int]:
    log = leadership_log.load(workdir / f"{name}.jsonl", name)
    end = log.last_seen or 0.0
    return {p for p, runs in log.runs.items() if runs and runs[-1][1] >= end}


def _observe(run: _Run, settle_s: float, after_kill_s: float) -> NeliDemoResult:
    procs, names, workdir, partitions, out = (
        run.procs,
        run.names,
        run.workdir,
        run.partitions,
        run.out,
    )
    t0 = time.monotonic()
    formed_at: float | None = None
    killed_at: float | None = None
    victim = ""
    victim_parts: set[int] = set()
    by_name = {p.name: p for p in procs.procs}
    while True:
        now = time.monotonic()
        led = {n: _led_now(workdir, n) for n in names if n != victim}
        note = ""
        if formed_at is None and set().union(*led.values()) == set(range(partitions)):
            formed_at, note = now, "group formed: every partition has a leader"
        elif formed_at is not None and killed_at is None and now - formed_at >= settle_s:
            victim = max(names, key=lambda n: len(led[n]))
            victim_parts = led[victim]
            by_name[victim].kill()
            killed_at, note = now, f"SIGKILL {victim} (led {sorted(victim_parts)})"
            led.pop(victim)
        out(_table(led, partitions, now - t0, note))
        if killed_at is not None and now - killed_at >= after_kill_s:
            break
        if formed_at is None and now - t0 > 60:
            raise RuntimeError("the group did not form within 60 s:\n" + procs.procs[0].log_tail())
        time.sleep(0.5)
    assert formed_at is not None
    live = [leadership_log.load(workdir / f"{n}.jsonl", n) for n in names if n != victim]
    everyone = [*live, leadership_log.load(workdir / f"{victim}.jsonl", victim)]
    takeover = {}
    for p in sorted(victim_parts):
        t = leadership_log.first_led_after(live, p, killed_at)
        takeover[p] = (t - killed_at) if t is not None else float("inf")
    s = run.session_s
    result = NeliDemoResult(
        takeover_s=takeover,
        bound_s=s + 2 * s + 4.0,
        uncovered_before_kill={
            p: leadership_log.uncovered(everyone, p, formed_at, killed_at - 0.5, tolerance=0.25)
            for p in range(partitions)
        },
    )
    out("")
    out(f"takeover of {victim}'s partitions after SIGKILL (S = {s:.1f} s, T = {2 * s:.1f} s):")
    for p, t in takeover.items():
        out(f"  partition {p}: {t:.2f} s")
    verdict = "OK" if result.ok else "FAILED"
    out(f"verdict: {verdict} (takeover bound S + T + 4 s = {result.bound_s:.1f} s;")
    out("         every partition led at every instant before the kill)")
    return result
