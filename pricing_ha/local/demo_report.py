"""The demo's record of its run, and what its traces add to the verdict.

:class:`RunRecord` is the demo's clock (``t=0``: wall and monotonic), how each process it
started ended, and every NELI member's last heartbeat. The demo writes it next to the span
files (:data:`~pricing_ha.local.traces_view.RUN_FILE`) once every process has stopped, so
that ``pricing-ha traces`` shows the same ``t=`` as the demo's log, says when a member was last
heard of, and names why a term has no end. :func:`trace_notes` adds, to each silence over the
availability bound, what the relay's leadership terms on its partition were doing;
:func:`show_traces` renders the tree and the timeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson

from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.procs import Proc
from pricing_ha.local.traces_view import RUN_FILE, Term, TraceSet, terms
from pricing_ha.local.verdict import Fault, Silence, Verdict

__all__ = [
    "VERDICT_FILE",
    "RunRecord",
    "broker_line",
    "pipeline_report",
    "report",
    "show_traces",
    "trace_notes",
    "write_verdict",
]


@dataclass
class RunRecord:
    """The demo's clock, how its processes ended, and the members' last heartbeats."""

    t0_wall_ns: int
    t0_mono: float
    processes: dict[int, dict[str, str]] = field(default_factory=dict)
    heartbeats: dict[str, dict[str, object]] = field(default_factory=dict)
    #: The run's fault timeline (the leadership timeline marks each one).
    faults: list[Fault] = field(default_factory=list)

    @classmethod
    def start(cls) -> RunRecord:
        """A record whose ``t=0`` is now."""
        return cls(time.time_ns(), time.monotonic())

    def now(self) -> float:
        """Seconds since ``t=0``."""
        return time.monotonic() - self.t0_mono

    def ended(self, proc: Proc, how: str) -> None:
        """Note how ``proc`` ended (the first note wins: a fault's kill is not overwritten)."""
        self.processes.setdefault(proc.pid, {"name": proc.name, "end": how})

    def stopped(self, proc: Proc) -> None:
        """Note a process stopped at the end of the run, from its exit status."""
        rc = proc.popen.returncode
        if rc is None:
            how = "still running when the run ended"
        elif rc == -9:
            how = (
                "SIGKILLed at the end of the run: it did not stop within the grace after "
                "SIGTERM (spans it had not exported are lost)"
            )
        else:
            how = f"stopped at the end of the run (exit status {rc})"
        self.ended(proc, how)

    def write(self, directory: Path) -> Path:
        """Write the record next to the span files."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / RUN_FILE
        path.write_bytes(
            orjson.dumps(
                {
                    "t0_wall_ns": self.t0_wall_ns,
                    "processes": {str(pid): p for pid, p in self.processes.items()},
                    "heartbeats": self.heartbeats,
                    "faults": [
                        {"at_s": f.at_s, "until_s": f.until_s, "text": f.text} for f in self.faults
                    ],
                },
                option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS,
            )
        )
        return path


def _relay_note(s: Silence, partition_terms: list[Term], traces: TraceSet) -> str:
    """What the relay's terms on the silence's partition did around it."""
    start_ns = traces.origin_ns + int(s.start_s * 1e9)
    end_ns = traces.origin_ns + int(s.end_s * 1e9)
    before = [t for t in partition_terms if t.start_ns <= start_ns]
    after = [t for t in partition_terms if start_ns < t.start_ns <= end_ns]
    parts = []
    if before:
        t = max(before, key=lambda t: t.start_ns)
        if t.open or (t.end_ns is not None and t.end_ns > end_ns):
            state = "no end recorded" if t.open else f"until {traces.at(t.end_ns)}"
            parts.append(f"{t.member} held its term ({state}; {t.end_note or 'ended later'})")
        else:
            parts.append(f"{t.member}'s term ended {traces.at(t.end_ns)} ({t.end_reason})")
    else:
        parts.append("no relay term on it before the silence")
    parts.extend(f"{t.member} acquired it {traces.at(t.start_ns)}" for t in after)
    return f"relay partition {s.partition}: " + "; ".join(parts)


def trace_notes(verdict: Verdict, traces_dir: Path, relay_group: str) -> Verdict:
    """``verdict`` with each breach on ``prices`` annotated from the relay's terms."""
    if not verdict.breaches or not traces_dir.is_dir():
        return verdict
    traces = TraceSet.load(traces_dir)
    relay_terms = [t for t in terms(traces) if t.group == relay_group]
    notes = [
        replace(
            s,
            trace_note=_relay_note(
                s, [t for t in relay_terms if t.partition == s.partition], traces
            ),
        )
        for s in verdict.breaches
    ]
    return replace(verdict, breaches=notes)


def show_traces(workdir: Path, out: Callable[[str], None]) -> None:
    """Render the run's fail-overs from the span files; print where the chart and tree are."""
    from pricing_ha.local.traces_chart import write_trace_report

    spans = workdir / "traces"
    if not spans.is_dir():
        out("no span files were written (OTLP export configured?)")
        return
    lines: list[str] = []
    try:
        html = write_trace_report(spans, workdir / "leadership.html", echo=lines.append)
    except Exception as exc:  # noqa: BLE001 - the verdict must not depend on the chart
        out(f"could not render the traces: {exc!r}")
        return
    tree = workdir / "failovers.txt"
    tree.write_text("\n".join(lines) + "\n")
    out(f"fail-over traces: {tree} (tree), {html} (leadership timeline chart)")
    out(f"  re-render any time with: pricing-ha traces {spans} --out {html}")


def broker_line(broker: LocalKafka) -> str:
    """Where the local Apache Kafka listens, as the demo announces it."""
    if len(broker.nodes) == 1:
        return f"Apache Kafka (KRaft, one node) on {broker.bootstrap}, pid {broker.pid}"
    nodes = ", ".join(f"{n.node_id} (rack {n.rack}, pid {n.pid})" for n in broker.nodes)
    return (
        f"Apache Kafka (KRaft, three nodes: {nodes}) on {broker.bootstrap}; topics: "
        "replication factor 3, min.insync.replicas 2"
    )


def report(
    verdict: Verdict,
    sub: dict[str, object],
    events: list[str],
    workdir: Path,
    out: Callable[[str], None],
) -> None:
    out("")
    out("faults injected (t= on the demo's clock, as in the log above):")
    for e in events:
        out(f"  {e}")
    out("")
    out("per instrument, feed vs prices:")
    out(verdict.render())
    out("")
    out(verdict.render_breaches())
    out("")
    out(
        f"independent subscriber: ok={sub.get('ok')} duplicates={sub.get('duplicates')} "
        f"gaps={sub.get('gaps')} max silence={_seconds(sub.get('max_silence_s'))}"
    )
    out(f"logs and summaries: {workdir}")
    show_traces(workdir, out)


def _seconds(value: object) -> str:
    """A silence as the verdict table prints it (``9.36s``); anything else as it is."""
    return f"{value:.2f}s" if isinstance(value, int | float) else str(value)


def pipeline_report(
    config_path: Path, verdict: Verdict, workdir: Path, out: Callable[[str], None]
) -> bool:
    """Ingest the run's topics with the Spark pipeline (the broker is still up) and report."""
    from pricing_ha.pipeline.report import ingest_and_report

    out("")
    out("pipeline: ingesting the topics with Spark and writing the report ...")
    result = ingest_and_report(config_path, workdir / "pipeline")
    out(result.verdict.render(limit=20))
    agrees = result.verdict.ok == verdict.ok
    agreement = "agrees" if agrees else "DISAGREES"
    out(f"pipeline report: {result.html} (verdict {agreement} with the demo's)")
    out(
        f"  re-run any time with: pricing-ha pipeline report --out {workdir / 'pipeline'}"
        f" --config {config_path}"
    )
    return result.verdict.ok and agrees


#: The verdict's machine-readable form, written beside the logs.
VERDICT_FILE = "verdict.json"


def write_verdict(verdict: Verdict, faults: list[Fault], workdir: Path) -> Path:
    """Write the verdict, its totals, the fault timeline and each breach with its cause to
    ``workdir/verdict.json`` (for scripts and tests: the printed report says the same)."""
    rows = verdict.instruments
    document = {
        "state": verdict.state.value,
        "exactly_once_in_order": verdict.ok,
        "subscriber_ok": verdict.subscriber_ok,
        "bound_s": verdict.bound.bound_s if verdict.bound is not None else None,
        "longest_silence_s": verdict.longest_silence_s,
        "totals": {
            key: sum(getattr(v, key) for v in rows)
            for key in ("expected", "delivered", "duplicates", "missing", "out_of_order")
        },
        "faults": [{"at_s": f.at_s, "until_s": f.until_s, "text": f.text} for f in faults],
        "breaches": [
            {
                "topic": s.topic,
                "instrument": s.instrument,
                "partition": s.partition,
                "start_s": round(s.start_s, 3),
                "duration_s": round(s.duration_s, 3),
                "cause": s.cause,
                "fault": s.fault,
            }
            for s in [*verdict.breaches, *verdict.raw_breaches]
        ],
    }
    path = workdir / VERDICT_FILE
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return path
