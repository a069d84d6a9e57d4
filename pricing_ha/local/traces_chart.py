"""The leadership timeline of ``pricing-ha traces``: one self-contained HTML page, inline SVG.

One chart per NELI group; one row per partition, split into a lane per member that led it, so
that the overlaps of non-exclusive hand-overs show. A term is a bar from its gain to its loss;
a term that never ended (its process was killed) is hatched and runs to the successor's
acquisition that links to it, or to its process's last span. Hovering a bar shows the member, the
times and the reasons. Publisher switches seen by the relay get a chart of their own (a mark
per switch, per partition, coloured by the group switched to). The faults of the demo's run
record (:data:`~pricing_ha.local.traces_view.RUN_FILE`) are marked across every chart: a red
line where each struck, a band over the time a lasting one (a pause, a lost AZ, a killed
broker until its restart) lasted, hover for what it was. No external assets.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

from pricing_ha.local.traces_tree import render_tree
from pricing_ha.local.traces_view import RUN_FILE, Switch, Term, TraceSet, switches, terms
from pricing_ha.local.verdict import Fault

__all__ = ["render_html", "write_trace_report"]

_WIDTH = 1100
_LEFT = 120
_RIGHT = 20
_LANE = 14
_ROW_PAD = 8
_AXIS = 28
_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
svg text { font-size: 11px; fill: #333; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
            vertical-align: -2px; }
.note { color: #666; font-size: 12px; }
"""


class _Scale:
    def __init__(self, t0: int, t1: int, origin: int) -> None:
        self.t0 = t0
        self.origin = origin  # the run's t=0 (labels), which may precede the first span
        self.span = max(int((t1 - t0) * 1.03), 1)  # a margin: the last terms stay visible
        self.width = _WIDTH - _LEFT - _RIGHT

    def x(self, ns: int) -> float:
        return _LEFT + (ns - self.t0) / self.span * self.width

    def ticks(self) -> list[tuple[float, str]]:
        seconds = self.span / 1e9
        raw = seconds / 10
        mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
        out = []
        k = 0
        while k * step <= seconds + 1e-9:
            out.append(
                (
                    self.x(self.t0 + int(k * step * 1e9)),
                    f"t={(self.t0 - self.origin) / 1e9 + k * step:.1f} s",
                )
            )
            k += 1
        return out


def _axis(scale: _Scale, y: float, height: float) -> list[str]:
    parts = []
    for x, label in scale.ticks():
        parts.append(
            f'<line x1="{x:.1f}" y1="{_AXIS - 6}" x2="{x:.1f}" y2="{y + height:.1f}" '
            'stroke="#ddd" />'
        )
        parts.append(f'<text x="{x:.1f}" y="{_AXIS - 10}" text-anchor="middle">{label}</text>')
    return parts


def _hatch(color: str, pid: str) -> str:
    return (
        f'<pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{color}" '
        f'opacity="0.35"/><line x1="0" y1="0" x2="0" y2="6" stroke="{color}" '
        'stroke-width="3"/></pattern>'
    )


def _term_title(term: Term, scale: _Scale, end: int) -> str:
    def rel(ns: int) -> str:
        return f"t={(ns - scale.origin) / 1e9:.3f} s"

    ended = (
        f"{term.end_kind} at {rel(end)} ({term.end_reason})"
        if not term.open
        else f"no end recorded, {term.end_note} (drawn to {rel(end)})"
    )
    return html.escape(
        f"{term.member} ({term.member_id}) leads partition {term.partition}\n"
        f"{term.start_kind} at {rel(term.start_ns)}; {ended}"
    )


def run_faults(directory: Path) -> list[Fault]:
    """The fault timeline of the run record in ``directory`` (none without one)."""
    record = directory / RUN_FILE
    if not record.is_file():
        return []
    data = orjson.loads(record.read_bytes())
    return [
        Fault(float(f["at_s"]), str(f["text"]), f.get("until_s")) for f in data.get("faults") or []
    ]


def _fault_marks(faults: Sequence[Fault], scale: _Scale, top: float, bottom: float) -> list[str]:
    """A band over each lasting fault, a line where each struck (hover: what it was)."""
    parts = []
    for f in faults:
        x0 = scale.x(scale.origin + int(f.at_s * 1e9))
        title = f"<title>{html.escape(f.describe())}</title>"
        if f.until_s is not None:
            x1 = scale.x(scale.origin + int(f.until_s * 1e9))
            parts.append(
                f'<rect class="fault" x="{x0:.1f}" y="{top:.1f}" width="{max(x1 - x0, 1):.1f}" '
                f'height="{bottom - top:.1f}" fill="#e15759" opacity="0.12">{title}</rect>'
            )
        parts.append(
            f'<line class="fault" x1="{x0:.1f}" y1="{top:.1f}" x2="{x0:.1f}" y2="{bottom:.1f}" '
            f'stroke="#c0392b" stroke-width="1.5" stroke-dasharray="4,2">{title}</line>'
        )
    return parts


def _group_chart(
    group: str, group_terms: list[Term], scale: _Scale, gid: int, faults: Sequence[Fault] = ()
) -> str:
    members: dict[str, int] = {}
    for t in group_terms:
        members.setdefault(t.member_id, len(members))
    rows: dict[int, list[str]] = {}
    for t in group_terms:
        lanes = rows.setdefault(t.partition, [])
        if t.member_id not in lanes:
            lanes.append(t.member_id)
    parts: list[str] = []
    defs = [
        _hatch(_PALETTE[i % len(_PALETTE)], f"h{gid}-{i}")
        for i in range(len(members))  # one hatch per member colour
    ]
    y = float(_AXIS)
    for partition in sorted(rows):
        lanes = rows[partition]
        height = len(lanes) * _LANE + _ROW_PAD
        parts.append(
            f'<rect x="{_LEFT}" y="{y:.1f}" width="{scale.width}" height="{height}" '
            f'fill="{"#f7f7f7" if partition % 2 else "#fff"}" />'
        )
        parts.append(
            f'<text x="{_LEFT - 8}" y="{y + height / 2 + 4:.1f}" text-anchor="end">'
            f"partition {partition}</text>"
        )
        for t in (t for t in group_terms if t.partition == partition):
            lane = lanes.index(t.member_id)
            color_index = members[t.member_id] % len(_PALETTE)
            end = t.drawn_end_ns
            x0, x1 = scale.x(t.start_ns), scale.x(max(end, t.start_ns))
            fill = f"url(#h{gid}-{color_index})" if t.open else _PALETTE[color_index]
            parts.append(
                f'<rect x="{x0:.1f}" y="{y + _ROW_PAD / 2 + lane * _LANE:.1f}" '
                f'width="{max(x1 - x0, 1.5):.1f}" height="{_LANE - 3}" fill="{fill}" '
                f'data-member="{html.escape(t.member)}" data-partition="{partition}">'
                f"<title>{_term_title(t, scale, end)}</title></rect>"
            )
        y += height
    svg_height = y + 6
    names = {t.member_id: t.member for t in group_terms}
    legend = "".join(
        f'<span><i style="background:{_PALETTE[i % len(_PALETTE)]}"></i>'
        f"{html.escape(names[m])}</span>"
        for m, i in members.items()
    )
    return (
        f"<h2>NELI group {html.escape(group)}</h2>"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{svg_height:.0f}" '
        f'data-group="{html.escape(group)}"><defs>{"".join(defs)}</defs>'
        + "".join(_axis(scale, _AXIS, y - _AXIS))
        + "".join(parts)
        + "".join(_fault_marks(faults, scale, _AXIS, y))
        + f'</svg><div class="legend">{legend}</div>'
    )


def _switch_chart(moves: Sequence[Switch], scale: _Scale) -> str:
    partitions = sorted({w.partition for w in moves if w.partition is not None})
    groups: dict[str, int] = {}
    for w in moves:
        groups.setdefault(w.source_to.rsplit("/", 1)[0], len(groups))
    y = float(_AXIS)
    parts: list[str] = []
    row_y: dict[int, float] = {}
    for p in partitions:
        row_y[p] = y
        parts.append(
            f'<text x="{_LEFT - 8}" y="{y + 12:.1f}" text-anchor="end">partition {p}</text>'
        )
        y += _LANE + _ROW_PAD
    for w in moves:
        if w.partition is None:
            continue
        x, top = scale.x(w.at_ns), row_y[w.partition]
        color = _PALETTE[groups[w.source_to.rsplit("/", 1)[0]] % len(_PALETTE)]
        title = html.escape(
            f"{w.stage}: {w.instrument}: {w.source_from} -> {w.source_to}\n"
            f"silence {w.silence_s * 1000:.0f} ms, gap {w.gap_seq} seq, "
            f"{w.duplicates_dropped} duplicates dropped"
        )
        parts.append(
            f'<path d="M{x:.1f},{top + 2:.1f} l5,{_LANE - 2} l-10,0 z" fill="{color}" '
            f'data-instrument="{html.escape(w.instrument)}"><title>{title}</title></path>'
        )
    legend = "".join(
        f'<span><i style="background:{_PALETTE[i % len(_PALETTE)]}"></i>to {html.escape(g)}</span>'
        for g, i in groups.items()
    )
    return (
        "<h2>Publisher switches seen by the relay (and subscribers in direct mode)</h2>"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{y + 6:.0f}">'
        + "".join(_axis(scale, _AXIS, y - _AXIS))
        + "".join(parts)
        + f'</svg><div class="legend">{legend}</div>'
    )


def render_html(
    traces: TraceSet,
    all_terms: list[Term],
    moves: Sequence[Switch],
    *,
    source: str,
    faults: Sequence[Fault] = (),
) -> str:
    """The whole page (see the module docstring); ``faults`` are marked on every group's
    chart and listed above them."""
    first = min((t.start_ns for t in all_terms), default=traces.origin_ns)
    scale = _Scale(min(first, traces.end_ns), traces.end_ns, traces.origin_ns)
    by_group: dict[str, list[Term]] = {}
    for t in all_terms:
        by_group.setdefault(t.group, []).append(t)
    charts = [
        _group_chart(g, by_group[g], scale, i, faults) for i, g in enumerate(sorted(by_group))
    ]
    if moves:
        charts.append(_switch_chart(moves, scale))
    if not charts:
        charts.append("<p>No leadership spans found.</p>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Leadership timeline</title><style>{_STYLE}</style></head><body>"
        "<h1>Leadership timeline</h1>"
        f'<p class="note">{len(traces.spans)} spans from {len(traces.files)} file(s) in '
        f"{html.escape(source)}; times on the run's clock (t=). Hatched bars: terms with no "
        "recorded end (the process was killed while leading; hover for how it ended); they run "
        "to the successor's takeover, or to when the member was last heard of.</p>"
        + _fault_list(faults)
        + "".join(charts)
        + "</body></html>\n"
    )


def _fault_list(faults: Sequence[Fault]) -> str:
    """The faults injected, as a list above the charts (empty without any)."""
    if not faults:
        return ""
    items = "".join(f"<li>{html.escape(f.describe())}</li>" for f in faults)
    return (
        '<p class="note">Faults injected (red dashed lines where they struck; a red band while '
        f'one lasted):</p><ul class="faults note">{items}</ul>'
    )


def write_trace_report(directory: Path, out: Path, *, echo: Callable[[str], None] = print) -> Path:
    """Print the text tree and write the HTML timeline of the spans in ``directory``.

    Returns:
        The HTML file written.
    """
    traces = TraceSet.load(directory)
    all_terms = terms(traces)
    echo(f"{len(traces.spans)} spans in {len(traces.files)} file(s) under {directory}")
    echo(render_tree(traces, all_terms))
    out.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(
        traces, all_terms, switches(traces), source=str(directory), faults=run_faults(directory)
    )
    out.write_text(page)
    echo(f"leadership timeline: {out}")
    return out
