"""``pricing-ha traces``: the fail-overs of a run, read back from its JSON-lines span files.

Every process writes its spans to ``[telemetry] traces_dir`` (one file per process, see
:mod:`pricing_ha.telemetry.jsonl`). From those files this module rebuilds:

* **leadership terms** per NELI group and partition (:func:`terms`). A term's span
  (``neli.term p{k}``) is exported only when it ends, so terms are rebuilt from the event spans
  too: each ``neli.acquired``/``neli.resumed`` span is a child of its term and opens it; a
  ``neli.fenced``/``neli.revoked`` child closes it. A term that never ended (its process was
  killed) lasts until a successor's ``neli.acquired`` links to it, or until its member was last
  heard of;
* **leadership changes** (:func:`failovers`): each ``neli.acquired`` span of a new member on a
  partition, with its predecessor's term: from the span's link (the predecessor's trace
  context, carried in NELI heartbeats) or, when the successor read none of its predecessor's
  heartbeats (a planned hand-over: the successor starts after the committed position, past
  them), inferred from the partition's previous term and marked so;

**The run record.** The demo writes ``demo-run.json`` (:data:`RUN_FILE`) next to the span
files: its clock's origin (so times read ``t=`` as in the demo's log), every member's last
NELI heartbeat (when it was last heard of: heartbeats go out every pulse, whereas price-path
spans are sampled and say nothing about liveness), and how each process ended (killed by a
fault, stopped at the end). Without it, times count from the first span and "last heard of" is
the process's latest always-recorded (non price-path) span.
* **publisher switches** seen by the relay (``relay.switch {instrument}`` spans) and by
  subscribers in direct mode (``subscriber.switch {instrument}``).

:func:`~pricing_ha.local.traces_tree.render_tree` prints the last two as a tree;
:mod:`pricing_ha.local.traces_chart` draws the terms as an HTML timeline;
:func:`~pricing_ha.local.traces_chart.write_trace_report` does both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from pricing_ha.telemetry.jsonl import load_spans

__all__ = [
    "RUN_FILE",
    "Failover",
    "Switch",
    "Term",
    "TraceSet",
    "failovers",
    "switches",
    "terms",
]

Span = dict[str, Any]
_GAINS = ("neli.acquired", "neli.resumed")
_LOSSES = ("neli.fenced", "neli.revoked")
_PREDECESSOR_LINK = "predecessor term"
_PRICE_PATH_KINDS = ("PRODUCER", "CONSUMER")  # sampled: no evidence of life or death
#: The demo's run record, next to the span files (see the module docstring).
RUN_FILE = "demo-run.json"


@dataclass
class TraceSet:
    """Every span of a run, each tagged with the file (process) it came from.

    Attributes:
        spans: the spans.
        files: the span files read.
        clock_origin_ns: the run's ``t=0`` (wall, ns) from its run record, if any.
        heartbeats: per NELI member id, the send time of its last heartbeat (run record).
        process_ends: per process id, how the process ended (run record).
    """

    spans: list[Span]
    files: list[Path] = field(default_factory=list)
    clock_origin_ns: int | None = None
    heartbeats: dict[str, int] = field(default_factory=dict)
    process_ends: dict[int, str] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path) -> TraceSet:
        """Read every ``*.jsonl`` file under ``directory``, and its run record if present."""
        files = sorted(directory.rglob("*.jsonl"))
        spans: list[Span] = []
        for path in files:
            for span in load_spans(path):
                if isinstance(span, dict) and "start_ns" in span:
                    span["_file"] = str(path)
                    spans.append(span)
        out = cls(spans, files)
        record = directory / RUN_FILE
        if record.is_file():
            data = orjson.loads(record.read_bytes())
            out.clock_origin_ns = int(data["t0_wall_ns"])
            out.heartbeats = {
                m: int(h["sent_wall_ns"]) for m, h in (data.get("heartbeats") or {}).items()
            }
            out.process_ends = {
                int(pid): str(p["end"]) for pid, p in (data.get("processes") or {}).items()
            }
        return out

    @property
    def origin_ns(self) -> int:
        """Time zero of the views: the run's ``t=0``, else the earliest instant in the data."""
        if self.clock_origin_ns is not None:
            return self.clock_origin_ns
        return min((s["start_ns"] for s in self.spans), default=0)

    @property
    def end_ns(self) -> int:
        """The latest instant in the data."""
        return max((_end(s) for s in self.spans), default=0)

    def last_seen(self) -> dict[str, int]:
        """Per file (process), the end of its latest always-recorded span (a fallback for
        members with no heartbeat in the run record; price-path spans are sampled)."""
        out: dict[str, int] = {}
        for s in self.spans:
            if s.get("kind") in _PRICE_PATH_KINDS:
                continue
            f = s.get("_file", "")
            out[f] = max(out.get(f, 0), _end(s))
        return out

    def at(self, ns: int | None) -> str:
        """``t=12.345 s`` on the run's clock (``?`` if unknown)."""
        return "t=?" if ns is None else f"t={(ns - self.origin_ns) / 1e9:.3f} s"


def _end(span: Span) -> int:
    end = span.get("end_ns")
    return int(end) if end is not None else int(span["start_ns"])


@dataclass
class Term:
    """One member's leadership of one partition, from a gain to a loss (or to no end)."""

    group: str
    partition: int
    member: str
    member_id: str
    term_id: str
    start_ns: int
    start_kind: str
    end_ns: int | None = None
    end_kind: str | None = None
    end_reason: str | None = None
    file: str = ""
    events: list[tuple[int, str, str]] = field(default_factory=list)  # (ns, name, reason)
    superseded_ns: int | None = None  # a successor's acquired linked to this open term
    last_seen_ns: int | None = None  # its last heartbeat, else its latest recorded span
    last_seen_from: str = "latest recorded span"
    pid: int | None = None
    process_end: str | None = None  # how its process ended (run record)

    @property
    def drawn_end_ns(self) -> int:
        """Where the term ends on a chart: its end, else its successor's takeover, else the
        last sign of life of its process."""
        if self.end_ns is not None:
            return self.end_ns
        if self.superseded_ns is not None:
            return self.superseded_ns
        return max(self.start_ns, self.last_seen_ns or self.start_ns)

    @property
    def open(self) -> bool:
        """Whether no end was recorded (the process died, or the run ended, while leading)."""
        return self.end_ns is None

    @property
    def end_note(self) -> str | None:
        """For an open term, why it has no end: how its process ended, or that nobody knows
        (``None``: the term ended)."""
        if not self.open:
            return None
        if self.process_end is not None:
            return f"process ended: {self.process_end}"
        return "no record of how its process ended"

    @property
    def explained(self) -> bool:
        """Whether the term has an end, or a known reason for having none."""
        return not self.open or self.process_end is not None


def terms(traces: TraceSet) -> list[Term]:
    """Every leadership term in the data, by group, partition and start."""
    by_id: dict[str, Term] = {}
    for s in sorted(traces.spans, key=lambda s: s["start_ns"]):
        name, attrs = s["name"], s.get("attributes") or {}
        if name in _GAINS and s.get("parent"):
            term_id = s["parent"]
            if term_id not in by_id:
                by_id[term_id] = Term(
                    group=str(attrs.get("neli.group", "?")),
                    partition=int(attrs.get("neli.partition", -1)),
                    member=str(attrs.get("neli.member.name", "?")),
                    member_id=str(attrs.get("neli.member.id", "?")),
                    term_id=term_id,
                    start_ns=s["start_ns"],
                    start_kind=name.removeprefix("neli."),
                    file=s.get("_file", ""),
                    pid=(s.get("resource") or {}).get("process.pid"),
                )
            by_id[term_id].events.append(
                (s["start_ns"], name.removeprefix("neli."), attrs.get("neli.reason", ""))
            )
    for s in traces.spans:  # losses, and the term spans of terms that ended
        attrs = s.get("attributes") or {}
        term = by_id.get(s.get("parent") or "") if s["name"] in _LOSSES else None
        if term is not None:
            term.events.append(
                (s["start_ns"], s["name"].removeprefix("neli."), attrs.get("neli.reason", ""))
            )
            if term.end_ns is None:
                term.end_ns = s["start_ns"]
                term.end_kind = s["name"].removeprefix("neli.")
                term.end_reason = attrs.get("neli.reason")
        if s["name"].startswith("neli.term ") and s.get("span_id") in by_id:
            term = by_id[s["span_id"]]
            term.end_ns = s.get("end_ns")
            term.end_kind = attrs.get("neli.term.end", term.end_kind)
            term.end_reason = attrs.get("neli.term.end_reason", term.end_reason)
    ordered = sorted(by_id.values(), key=lambda t: (t.group, t.partition, t.start_ns))
    for change in _acquisitions(traces, ordered):
        pred = change["pred"]
        if pred is not None and pred.open and pred.term_id != change["term_id"]:
            t = change["span"]["start_ns"]
            pred.superseded_ns = t if pred.superseded_ns is None else min(pred.superseded_ns, t)
    _annotate(traces, ordered)
    return ordered


def _annotate(traces: TraceSet, ordered: list[Term]) -> None:
    """Events in order; when each member was last heard of; how its process ended."""
    seen = traces.last_seen()
    for term in ordered:
        term.events.sort()
        if term.member_id in traces.heartbeats:
            term.last_seen_ns = traces.heartbeats[term.member_id]
            term.last_seen_from = "last heartbeat"
        else:
            term.last_seen_ns = seen.get(term.file)
        if term.pid is not None:
            term.process_end = traces.process_ends.get(int(term.pid))


def _acquisitions(traces: TraceSet, ordered: list[Term]) -> Iterable[dict[str, Any]]:
    """``neli.acquired`` spans with their predecessor's term, oldest first.

    The predecessor is the term the span links to; with no link, the latest earlier term on
    the same group and partition (``inferred``).
    """
    by_id = {t.term_id: t for t in ordered}
    for s in sorted(traces.spans, key=lambda s: s["start_ns"]):
        if s["name"] != "neli.acquired":
            continue
        linked = [
            link["span_id"]
            for link in s.get("links") or []
            if (link.get("attributes") or {}).get("neli.link") == _PREDECESSOR_LINK
        ]
        if linked:
            yield {
                "span": s,
                "pred": by_id.get(linked[0]),
                "link": linked[0],
                "term_id": s.get("parent"),
                "inferred": False,
            }
            continue
        attrs = s.get("attributes") or {}
        group, partition = attrs.get("neli.group"), attrs.get("neli.partition")
        earlier = [
            t
            for t in ordered
            if t.group == group
            and t.partition == partition
            and t.start_ns < s["start_ns"]
            and t.term_id != s.get("parent")
        ]
        if earlier:
            pred = max(earlier, key=lambda t: t.start_ns)
            yield {
                "span": s,
                "pred": pred,
                "link": pred.term_id,
                "term_id": s.get("parent"),
                "inferred": True,
            }


@dataclass(frozen=True)
class Failover:
    """One leadership change that links to the predecessor's term."""

    group: str
    partition: int
    successor: str
    successor_id: str
    acquired_ns: int
    reason: str
    predecessor: str
    predecessor_term: Term | None
    predecessor_last_seen_ns: int | None
    #: True when no link named the predecessor and it was taken from the partition's terms.
    inferred: bool = False
    successor_term: Term | None = None
    mode: str = ""

    @property
    def kind(self) -> str:
        """``fail-over`` if the predecessor's term never ended, else ``hand-over``."""
        term = self.predecessor_term
        return "fail-over" if term is None or term.open else "hand-over"

    @property
    def takeover_s(self) -> float | None:
        """From the predecessor's term end (or, if it never ended, from when it was last
        heard of) to the successor's acquisition."""
        term = self.predecessor_term
        since = self.predecessor_last_seen_ns if term is None or term.open else term.end_ns
        return None if since is None else (self.acquired_ns - since) / 1e9


def failovers(traces: TraceSet, all_terms: list[Term] | None = None) -> list[Failover]:
    """Every ``neli.acquired`` that follows another member's term, oldest first."""
    ordered = all_terms if all_terms is not None else terms(traces)
    by_id = {t.term_id: t for t in ordered}
    out = []
    for change in _acquisitions(traces, ordered):
        s, attrs = change["span"], change["span"].get("attributes") or {}
        pred = change["pred"]
        if pred is not None and pred.member_id == attrs.get("neli.member.id"):
            continue  # the same member again: no change of leader
        last_seen = None
        if pred is not None and pred.last_seen_ns is not None:
            # Heard of before this acquisition (a survivor goes on living).
            last_seen = min(pred.last_seen_ns, s["start_ns"])
        out.append(
            Failover(
                group=str(attrs.get("neli.group", "?")),
                partition=int(attrs.get("neli.partition", -1)),
                successor=str(attrs.get("neli.member.name", "?")),
                successor_id=str(attrs.get("neli.member.id", "?")),
                acquired_ns=s["start_ns"],
                reason=str(attrs.get("neli.reason", "")),
                predecessor=str(
                    attrs.get("neli.predecessor.member.name", pred.member if pred else "?")
                ),
                predecessor_term=pred,
                predecessor_last_seen_ns=last_seen,
                inferred=bool(change["inferred"]),
                successor_term=by_id.get(s.get("parent") or ""),
                mode=str(attrs.get("neli.mode", "")),
            )
        )
    return out


@dataclass(frozen=True)
class Switch:
    """A switch of publisher of one instrument, as the relay (or a direct subscriber) saw it."""

    at_ns: int
    stage: str
    instrument: str
    partition: int | None
    source_from: str
    source_to: str
    gap_seq: int
    silence_s: float
    duplicates_dropped: int
    observer: str


def switches(traces: TraceSet) -> list[Switch]:
    """Every ``*.switch {instrument}`` span, oldest first."""
    out = []
    for s in traces.spans:
        if ".switch " not in s["name"]:
            continue
        a = s.get("attributes") or {}
        partition = a.get("pricing_ha.partition")
        out.append(
            Switch(
                at_ns=_end(s),
                stage=str(a.get("pricing_ha.stage", s["name"].split(".switch", 1)[0])),
                instrument=str(a.get("pricing_ha.instrument", s["name"].split(" ", 1)[-1])),
                partition=int(partition) if partition is not None else None,
                source_from=str(a.get("pricing_ha.switch.from", "?")),
                source_to=str(a.get("pricing_ha.switch.to", "?")),
                gap_seq=int(a.get("pricing_ha.switch.gap_seq", 0)),
                silence_s=float(a.get("pricing_ha.switch.silence_s", 0.0)),
                duplicates_dropped=int(a.get("pricing_ha.switch.duplicates_dropped", 0)),
                observer=str(a.get("pricing_ha.observer", "?")),
            )
        )
    return sorted(out, key=lambda w: w.at_ns)
