"""The text view of ``pricing-ha traces``: each leadership change as a tree of spans.

One tree per change of leader (:func:`~pricing_ha.local.traces_view.failovers`): the
predecessor's ``neli.term`` span with its event spans as children, the successor's term with
its ``neli.acquired`` child and the link between them (read from the span, or inferred), then
how long the partition waited. A successor that acquired before its predecessor's term ended
is printed as an **overlap**, not as a negative wait: in non-exclusive mode (the publishers) a
member keeps leading a released partition until its observations go stale, so its successor
starts first by design; in exclusive mode an overlap would be a defect and says so. Times are
``t=`` on the run's clock (:meth:`~pricing_ha.local.traces_view.TraceSet.at`).
"""

from __future__ import annotations

from pricing_ha.local.traces_view import Failover, Term, TraceSet, failovers, switches

__all__ = ["render_tree"]

_MID, _LAST, _BAR, _GAP = "├─ ", "└─ ", "│  ", "   "


def _tree(lines: list[str], items: list[tuple[str, list[str]]], indent: str = "") -> None:
    """Append ``(label, children)`` items with box-drawing branches."""
    for i, (label, children) in enumerate(items):
        last = i == len(items) - 1
        lines.append(f"{indent}{_LAST if last else _MID}{label}")
        pad = indent + (_GAP if last else _BAR)
        for j, child in enumerate(children):
            lines.append(f"{pad}{_LAST if j == len(children) - 1 else _MID}{child}")


def _term_label(role: str, term: Term, traces: TraceSet) -> tuple[str, list[str]]:
    if term.open:
        end = f"no end recorded ({term.end_note})"
    else:
        end = f"{term.end_kind} {traces.at(term.end_ns)} ({term.end_reason})"
    label = (
        f"{role}  neli.term p{term.partition}  {term.member}  {traces.at(term.start_ns)} -> {end}"
    )
    children = [f"neli.{name}  {traces.at(ns)}  ({reason})" for ns, name, reason in term.events]
    if term.open:
        children.append(f"last heard of {traces.at(term.last_seen_ns)} ({term.last_seen_from})")
    return label, children


def _wait(f: Failover, traces: TraceSet) -> str:
    took = f.takeover_s
    if took is None:
        return "takeover  ? (no time for the predecessor)"
    if f.kind == "fail-over":
        since = f"after the predecessor was last heard of ({traces.at(f.predecessor_last_seen_ns)})"
    else:
        since = "after its term ended"
    if took >= 0:
        return f"takeover  {took:.3f} s {since}"
    what = (
        "both led: a non-exclusive hand-over, expected"
        if f.mode != "exclusive"
        else "EXCLUSIVE GROUP: two leaders at once"
    )
    return f"overlap  {-took:.3f} s: acquired before the predecessor's term ended ({what})"


def render_tree(traces: TraceSet, all_terms: list[Term] | None = None) -> str:
    """The leadership changes and relay switches of a run, as trees of spans."""
    changes = failovers(traces, all_terms)
    inferred = sum(f.inferred for f in changes)
    lines = [
        f"{len(changes)} leadership change(s) ({len(changes) - inferred} linked by their spans, "
        f"{inferred} inferred from the partition's previous term); times on the run's clock"
    ]
    for f in changes:
        lines.append(
            f"{f.kind} {f.group} partition {f.partition}: {f.predecessor} -> {f.successor}"
        )
        items: list[tuple[str, list[str]]] = []
        if f.predecessor_term is None:
            items.append(("predecessor  (its spans are not in this directory)", []))
        else:
            items.append(_term_label("predecessor", f.predecessor_term, traces))
        link = (
            "inferred: no heartbeat of the predecessor reached the successor"
            if f.inferred
            else "linked: predecessor term"
        )
        if f.successor_term is not None:
            label, children = _term_label("successor", f.successor_term, traces)
            children = [f"{c}  <- {link}" if c.startswith("neli.acquired") else c for c in children]
            items.append((label, children))
        else:
            items.append(
                (f"successor  {f.successor} acquired {traces.at(f.acquired_ns)} ({link})", [])
            )
        items.append((_wait(f, traces), []))
        _tree(lines, items)
    moves = switches(traces)
    lines.append(f"{len(moves)} publisher switch(es) seen by the relay or direct subscribers")
    for w in moves:
        lines.append(
            f"{w.stage}.switch {w.instrument} (partition {w.partition}) at "
            f"{traces.at(w.at_ns)} by {w.observer}"
        )
        lines.append(
            f"{_LAST}{w.source_from} -> {w.source_to}: silence {w.silence_s * 1000:.0f} ms, "
            f"gap {w.gap_seq} seq, {w.duplicates_dropped} duplicate(s) dropped before"
        )
    unexplained = [t for t in (all_terms or []) if not t.explained]
    if all_terms is not None:
        lines.append(
            f"{len(all_terms)} term(s); {sum(t.open for t in all_terms)} with no recorded end, "
            f"{len(unexplained)} of them with no known reason"
        )
        lines.extend(
            f"{_MID}{t.group} p{t.partition} {t.member} since {traces.at(t.start_ns)}"
            for t in unexplained
        )
    return "\n".join(lines)
