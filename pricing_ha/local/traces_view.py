"""``pricing-ha traces``: the fail-overs of a run, read back from its JSON-lines span files.

Every process writes its spans to ``[telemetry] traces_dir`` (one file per process, see
:mod:`pricing_ha.telemetry.jsonl`). From those files this module rebuilds:

* **leadership terms** per NELI group and partition (:func:`terms`). A term's span
  (``neli.term p{k}``) is exported only when it ends, so terms are rebuilt from the event spans
  too: each ``neli.acquired``/``neli.resumed`` span is a child of its term and opens it; a
  ``neli.fenced``/``neli.revoked`` child closes it. A term that never ended (its process was
  killed) lasts until a successor's ``neli.acquired`` links to it, or until its process's last
  span;
* **leadership changes** (:func:`failovers`): each ``neli.acquired`` span with a link to a
  predecessor's term (carried in NELI heartbeats): who led before, when it was last heard of,
  who leads now and how long the partition waited;
* **publisher switches** seen by the relay (``relay.switch {instrument}`` spans) and by
  subscribers in direct mode (``subscriber.switch {instrument}``).

:func:`render_tree` prints the last two as text; :mod:`pricing_ha.local.traces_chart` draws the
terms as an HTML timeline. :func:`~pricing_ha.local.traces_chart.write_trace_report` does both.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pricing_ha.telemetry.jsonl import load_spans

__all__ = [
    "Failover",
    "Switch",
    "Term",
    "TraceSet",
    "failovers",
    "render_tree",
    "switches",
    "terms",
]

Span = dict[str, Any]
_GAINS = ("neli.acquired", "neli.resumed")
_LOSSES = ("neli.fenced", "neli.revoked")
_PREDECESSOR_LINK = "predecessor term"


@dataclass
class TraceSet:
    """Every span of a run, each tagged with the file (process) it came from."""

    spans: list[Span]
    files: list[Path] = field(default_factory=list)

    @classmethod
    def load(cls, directory: Path) -> TraceSet:
        """Read every ``*.jsonl`` file under ``directory``."""
        files = sorted(directory.rglob("*.jsonl"))
        spans: list[Span] = []
        for path in files:
            for span in load_spans(path):
                if isinstance(span, dict) and "start_ns" in span:
                    span["_file"] = str(path)
                    spans.append(span)
        return cls(spans, files)

    @property
    def origin_ns(self) -> int:
        """The earliest instant in the data (time zero of the views)."""
        return min((s["start_ns"] for s in self.spans), default=0)

    @property
    def end_ns(self) -> int:
        """The latest instant in the data."""
        return max((_end(s) for s in self.spans), default=0)

    def last_seen(self) -> dict[str, int]:
        """Per file (process), the end of its latest span: when it was last heard of."""
        out: dict[str, int] = {}
        for s in self.spans:
            f = s.get("_file", "")
            out[f] = max(out.get(f, 0), _end(s))
        return out


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
    last_seen_ns: int | None = None  # the end of the latest span of its process

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
    for change in _acquisitions(traces):
        pred = by_id.get(change["link"])
        if pred is not None and pred.open and pred.term_id != change["term_id"]:
            t = change["span"]["start_ns"]
            pred.superseded_ns = t if pred.superseded_ns is None else min(pred.superseded_ns, t)
    seen = traces.last_seen()
    for term in by_id.values():
        term.events.sort()
        term.last_seen_ns = seen.get(term.file)
    return sorted(by_id.values(), key=lambda t: (t.group, t.partition, t.start_ns))


def _acquisitions(traces: TraceSet) -> Iterable[dict[str, Any]]:
    """``neli.acquired`` spans with their predecessor-term link, oldest first."""
    for s in sorted(traces.spans, key=lambda s: s["start_ns"]):
        if s["name"] != "neli.acquired":
            continue
        for link in s.get("links") or []:
            if (link.get("attributes") or {}).get("neli.link") == _PREDECESSOR_LINK:
                yield {"span": s, "link": link["span_id"], "term_id": s.get("parent")}


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
    """Every ``neli.acquired`` that links to another member's term, oldest first."""
    by_id = {t.term_id: t for t in (all_terms if all_terms is not None else terms(traces))}
    seen = traces.last_seen()
    out = []
    for change in _acquisitions(traces):
        s, attrs = change["span"], change["span"].get("attributes") or {}
        pred = by_id.get(change["link"])
        if pred is not None and pred.member_id == attrs.get("neli.member.id"):
            continue  # the same member again: no change of leader
        last_seen = None
        if pred is not None:
            # Its process's last span before this acquisition (a survivor goes on living).
            last_seen = min(seen.get(pred.file, pred.start_ns), s["start_ns"])
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


def _at(ns: int | None, origin: int) -> str:
    if ns is None:
        return "?"
    wall = time.strftime("%H:%M:%S", time.gmtime(ns / 1e9)) + f".{ns // 1_000_000 % 1000:03d}"
    return f"+{(ns - origin) / 1e9:.3f} s ({wall})"


def render_tree(traces: TraceSet, all_terms: list[Term] | None = None) -> str:
    """The leadership changes and relay switches of a run, as an indented text tree."""
    origin = traces.origin_ns
    changes = failovers(traces, all_terms)
    lines = [f"{len(changes)} leadership change(s) linked to a predecessor's term"]
    for f in changes:
        lines.append(
            f"{f.kind} {f.group} partition {f.partition}: {f.predecessor} -> {f.successor}"
        )
        term = f.predecessor_term
        lines.append(f"  predecessor  {f.predecessor}")
        if term is None:
            lines.append("    (its spans are not in this directory)")
        else:
            lines.append(f"    term       since {_at(term.start_ns, origin)} ({term.start_kind})")
            ns, name, reason = term.events[-1] if term.events else (term.start_ns, "?", "")
            lines.append(f"    last event {name} at {_at(ns, origin)} ({reason})")
            if term.open:
                lines.append("    term end   none recorded: the process stopped while leading")
            else:
                lines.append(
                    f"    term end   {term.end_kind} at {_at(term.end_ns, origin)}"
                    f" ({term.end_reason})"
                )
            lines.append(f"    last seen  {_at(f.predecessor_last_seen_ns, origin)}")
        lines.append(
            f"  new leader   {f.successor} acquired at {_at(f.acquired_ns, origin)} ({f.reason})"
        )
        took = f.takeover_s
        since = "its term ended" if f.kind == "hand-over" else "the predecessor was last seen"
        lines.append(
            f"  takeover     {took:.3f} s after {since}" if took is not None else "  takeover ?"
        )
    moves = switches(traces)
    lines.append(f"{len(moves)} publisher switch(es) seen by the relay or direct subscribers")
    for w in moves:
        lines.append(
            f"{w.stage}.switch {w.instrument} (partition {w.partition}) at "
            f"{_at(w.at_ns, origin)} by {w.observer}"
        )
        lines.append(
            f"  {w.source_from} -> {w.source_to}: silence {w.silence_s * 1000:.0f} ms, "
            f"gap {w.gap_seq} seq, {w.duplicates_dropped} duplicate(s) dropped before"
        )
    return "\n".join(lines)
