"""Starting NELI members as separate OS processes and reading what they observed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neli import NeliConfig
from pricing_ha.local import cluster as local_cluster
from pricing_ha.local import leadership_log
from pricing_ha.local.leadership_log import MemberLog
from pricing_ha.local.procs import Proc, ProcessGroup

#: S for the tests (PRICING_HA_TEST_SESSION_MS; 3000 ms by default, the publishers' S). A broker
#: enforces its group.min.session.timeout.ms (500 ms on the local Kafka, 6000 by default
#: elsewhere): against another cluster, match it.
SESSION_MS = local_cluster.SESSION_MS


def member_config(bootstrap: str, topic: str, group: str, name: str, **kw: Any) -> NeliConfig:
    """The configuration of a member run in the test's own process, with the tests' S."""
    return NeliConfig(
        bootstrap_servers=bootstrap,
        group_id=group,
        topic=topic,
        member_name=name,
        session_timeout_ms=SESSION_MS,
        **kw,
    )


@dataclass
class Cluster:
    """Members of NELI groups, each a separate process writing a probe file."""

    procs: ProcessGroup
    bootstrap: str
    topic: str
    workdir: Path
    members: dict[str, Proc] = field(default_factory=dict)

    def start(
        self,
        name: str,
        group: str,
        *,
        variant: str = "full",
        mode: str = "non-exclusive",
        session_ms: int = SESSION_MS,
        threshold_ms: int | None = None,
        trace_file: Path | None = None,
        az: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Proc:
        """Start one member process (spans to ``trace_file``, if given, tagged with ``az``)."""
        argv = [
            "pricing_ha.local.probe",
            f"--bootstrap={self.bootstrap}",
            f"--topic={self.topic}",
            f"--group={group}",
            f"--name={name}",
            f"--out={self.workdir / (name + '.jsonl')}",
            f"--variant={variant}",
            f"--mode={mode}",
            f"--session-ms={session_ms}",
        ]
        if threshold_ms is not None:
            argv.append(f"--threshold-ms={threshold_ms}")
        if trace_file is not None:
            argv.append(f"--trace-file={trace_file}")
        if az is not None:
            argv.append(f"--az={az}")
        proc = self.procs.spawn(name, argv, env=env, python_module=True)
        self.members[name] = proc
        return proc

    def log(self, name: str) -> MemberLog:
        """The records of one member so far."""
        return leadership_log.load(self.workdir / f"{name}.jsonl", name)

    def logs(self, *names: str) -> list[MemberLog]:
        """The records of the named members (all members by default)."""
        return [self.log(n) for n in (names or tuple(self.members))]

    def led_now(self, name: str) -> set[int]:
        """Partitions the member's latest records say it leads (for waiting, not for asserting)."""
        log = self.log(name)
        end = log.last_seen or 0.0
        return {p for p, runs in log.runs.items() if runs and runs[-1][1] >= end}

    def union_led_now(self, *names: str) -> set[int]:
        """Union of :meth:`led_now` over members."""
        out: set[int] = set()
        for n in names or tuple(self.members):
            out |= self.led_now(n)
        return out

    def diagnostics(self) -> str:
        """Tail of every member's log, for assertion messages."""
        return "\n".join(f"--- {n}\n{p.log_tail(15)}" for n, p in self.members.items())
