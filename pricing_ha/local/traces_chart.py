"""The leadership timeline of ``pricing-ha traces``: one self-contained HTML page.

One chart per NELI group; one row per partition, split into a lane per member that led it, so
that the overlaps of non-exclusive hand-overs show. A term is a bar from its gain to its loss;
a term that never ended (its process was killed) is hatched and runs to the successor's
acquisition that links to it, or to its process's last span. Hovering a bar shows the member, the
times and the reasons. Publisher switches seen by the relay get a chart of their own (a mark
per switch, per partition, coloured by the group switched to). The faults of the demo's run
record (:data:`~pricing_ha.local.traces_view.RUN_FILE`) are marked across every chart: a red
line where each struck, a band over the time a lasting one (a pause, a lost AZ, a killed
broker until its restart) lasted, hover for what it was. Every chart shares one time axis, on
the run's clock. The charts are matplotlib's, inlined as SVG (:mod:`pricing_ha.charts`): no
external assets.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba

from pricing_ha.charts import PALETTE, Note, figure, style, svg
from pricing_ha.local.traces_tree import render_tree
from pricing_ha.local.traces_view import RUN_FILE, Switch, Term, TraceSet, switches, terms
from pricing_ha.local.verdict import Fault

__all__ = ["render_html", "write_trace_report"]

_WIDTH_IN = 11.0
_LANE_IN = 0.19  # inches per lane (one member's bars in one partition's row)
_AXES_IN = 0.75  # the time axis and its label, below the lanes
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
figure { margin: 0; } svg { max-width: 100%; height: auto; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
            vertical-align: -2px; }
.note { color: #666; font-size: 12px; }
"""


class _Clock:
    """The run's clock: nanoseconds of wall time to seconds since its ``t=0``; the time range
    every chart shows."""

    def __init__(self, t0: int, t1: int, origin: int) -> None:
        self.origin = origin  # the run's t=0, which may precede the first span
        margin = max((t1 - t0) * 0.03, 1e6)  # the last terms stay visible
        self.lo, self.hi = self.s(t0), self.s(int(t1 + margin))

    def s(self, ns: int) -> float:
        return (ns - self.origin) / 1e9

    def axis(self, ax: Axes) -> None:
        ax.set_xlim(self.lo, self.hi)
        ax.set_xlabel("t (s, on the run's clock)")
        ax.grid(axis="x", color="#ddd", linewidth=0.6)
        ax.set_axisbelow(True)


def _term_title(term: Term, clock: _Clock, end: int) -> str:
    def rel(ns: int) -> str:
        return f"t={clock.s(ns):.3f} s"

    ended = (
        f"{term.end_kind} at {rel(end)} ({term.end_reason})"
        if not term.open
        else f"no end recorded, {term.end_note} (drawn to {rel(end)})"
    )
    return (
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


def _fault_marks(ax: Axes, faults: Sequence[Fault], notes: dict[str, Note]) -> None:
    """A band over each lasting fault, a dashed line where each struck (hover: what it was)."""
    for k, f in enumerate(faults):
        if f.until_s is not None:
            band = ax.axvspan(f.at_s, f.until_s, color="#e15759", alpha=0.12, linewidth=0)
            band.set_gid(f"band-{k}")
            notes[f"band-{k}"] = Note(f.describe(), "fault-band", {"at-s": f"{f.at_s:g}"})
        line = ax.axvline(f.at_s, color="#c0392b", linewidth=1.2, linestyle=(0, (4, 2)))
        line.set_gid(f"fault-{k}")
        notes[f"fault-{k}"] = Note(f.describe(), "fault", {"at-s": f"{f.at_s:g}"})


def _legend(items: Sequence[tuple[str, int]]) -> str:
    spans = "".join(
        f'<span><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{html.escape(label)}</span>'
        for label, i in items
    )
    return f'<div class="legend">{spans}</div>'


def _group_chart(
    group: str, group_terms: list[Term], clock: _Clock, gid: int, faults: Sequence[Fault] = ()
) -> str:
    members: dict[str, int] = {}
    for t in group_terms:
        members.setdefault(t.member_id, len(members))
    rows: dict[int, list[str]] = {}
    for t in group_terms:
        lanes = rows.setdefault(t.partition, [])
        if t.member_id not in lanes:
            lanes.append(t.member_id)
    n_lanes = sum(len(lanes) + 0.5 for lanes in rows.values())
    notes: dict[str, Note] = {}
    with style():
        fig = figure(_WIDTH_IN, _AXES_IN + _LANE_IN * n_lanes)
        ax = fig.add_subplot()
        y, centres = 0.0, []
        for partition in sorted(rows):
            lanes = rows[partition]
            height = len(lanes) + 0.5
            if partition % 2:
                ax.axhspan(y, y + height, color="#f4f4f4", linewidth=0)
            centres.append(y + height / 2)
            for t in (t for t in group_terms if t.partition == partition):
                colour = PALETTE[members[t.member_id] % len(PALETTE)]
                end = t.drawn_end_ns
                start_s, end_s = clock.s(t.start_ns), clock.s(max(end, t.start_ns))
                lane_y = y + 0.7 + lanes.index(t.member_id)
                width = max(end_s - start_s, (clock.hi - clock.lo) / 800)
                # An open term: pale, with its member's colour in hatching over it.
                face = to_rgba(colour, 0.25) if t.open else colour
                (bar,) = ax.barh(lane_y, width, left=start_s, height=0.8, color=face, linewidth=0)
                if t.open:
                    ax.barh(
                        lane_y,
                        width,
                        left=start_s,
                        height=0.8,
                        facecolor="none",
                        edgecolor=colour,
                        hatch="////",
                        linewidth=0,
                    )
                key = f"term-{len(notes)}"
                bar.set_gid(key)
                notes[key] = Note(
                    _term_title(t, clock, end),
                    "term",
                    {"member": t.member, "partition": str(partition)},
                )
            y += height
        ax.set_yticks(centres, [f"partition {p}" for p in sorted(rows)])
        ax.tick_params(axis="y", length=0)
        ax.set_ylim(y, 0)
        clock.axis(ax)
        _fault_marks(ax, faults, notes)
        chart = svg(fig, f"g{gid}", notes)
    names = {t.member_id: t.member for t in group_terms}
    return (
        f"<h2>NELI group {html.escape(group)}</h2>"
        f'<figure data-group="{html.escape(group)}">{chart}</figure>'
        + _legend([(names[m], i) for m, i in members.items()])
    )


def _switch_chart(moves: Sequence[Switch], clock: _Clock) -> str:
    partitions = sorted({w.partition for w in moves if w.partition is not None})
    groups: dict[str, int] = {}
    for w in moves:
        groups.setdefault(w.source_to.rsplit("/", 1)[0], len(groups))
    notes: dict[str, Note] = {}
    with style():
        fig = figure(_WIDTH_IN, _AXES_IN + 0.3 * len(partitions))
        ax = fig.add_subplot()
        for k, w in enumerate(moves):
            if w.partition is None:
                continue
            colour = PALETTE[groups[w.source_to.rsplit("/", 1)[0]] % len(PALETTE)]
            (mark,) = ax.plot(
                [clock.s(w.at_ns)], [partitions.index(w.partition)], "v", color=colour, ms=7
            )
            mark.set_gid(f"switch-{k}")
            notes[f"switch-{k}"] = Note(
                f"{w.stage}: {w.instrument}: {w.source_from} -> {w.source_to}\n"
                f"silence {w.silence_s * 1000:.0f} ms, gap {w.gap_seq} seq, "
                f"{w.duplicates_dropped} duplicates dropped",
                "switch",
                {"instrument": w.instrument},
            )
        ax.set_yticks(range(len(partitions)), [f"partition {p}" for p in partitions])
        ax.set_ylim(len(partitions) - 0.5, -0.5)
        clock.axis(ax)
        chart = svg(fig, "switches", notes)
    return (
        "<h2>Publisher switches seen by the relay (and subscribers in direct mode)</h2>"
        f"<figure>{chart}</figure>" + _legend([(f"to {g}", i) for g, i in groups.items()])
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
    clock = _Clock(min(first, traces.end_ns), traces.end_ns, traces.origin_ns)
    by_group: dict[str, list[Term]] = {}
    for t in all_terms:
        by_group.setdefault(t.group, []).append(t)
    charts = [
        _group_chart(g, by_group[g], clock, i, faults) for i, g in enumerate(sorted(by_group))
    ]
    if moves:
        charts.append(_switch_chart(moves, clock))
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
