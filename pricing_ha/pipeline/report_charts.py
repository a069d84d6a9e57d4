"""The pipeline report's charts, as inline SVG (matplotlib, through :mod:`pricing_ha.charts`).

* :func:`timeline_svg` — who published on ``prices.raw`` when: a lane per (group, member), a
  bar over each run of seconds it published in, a red tick where a fail-over moved an
  instrument to it (hover: which instrument, from whom, how long the hand-over took).
* :func:`silences_svg` — the longest silence on ``prices`` per instrument.
* :func:`latency_svg` — the end-to-end latency distribution, log-spaced bins on log-log axes:
  a fail-over's tail of seconds next to a body of milliseconds, where a linear axis would show
  one bar and nothing else.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from matplotlib.ticker import LogFormatter

from pricing_ha.charts import PALETTE, Note, figure, style, svg

__all__ = ["LATENCY_FLOOR_MS", "latency_svg", "silences_svg", "timeline_svg"]

#: Latencies at or below this many ms share the first bin (clocks of two hosts may even make
#: them negative); a log axis cannot start at zero.
LATENCY_FLOOR_MS = 0.01
_W = 10.0  # inches; 100 dpi in a browser: the page's width

Row = dict[str, Any]


def _none(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def _runs(seconds: list[float], step: float) -> list[tuple[float, float]]:
    """Consecutive buckets (``step`` apart) merged into (start, width) runs."""
    runs: list[tuple[float, float]] = []
    for s in sorted(seconds):
        if runs and s <= runs[-1][0] + runs[-1][1] + 1e-9:
            runs[-1] = (runs[-1][0], s + step - runs[-1][0])
        else:
            runs.append((s, step))
    return runs


def timeline_svg(leadership: Sequence[Row], failovers: Sequence[Row], bucket_s: float = 1.0) -> str:
    """The leadership timeline of the report (see the module docstring)."""
    if not leadership:
        return _none("no raw prices")
    lanes = sorted({(str(r["group"]), str(r["member"])) for r in leadership})
    first: datetime = min(r["bucket"] for r in leadership)
    t0 = first.timestamp()
    groups = sorted({g for g, _ in lanes})
    colour = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}
    notes: dict[str, Note] = {}
    with style():
        fig = figure(_W, 0.9 + 0.28 * len(lanes))
        ax = fig.add_subplot()
        for i, lane in enumerate(lanes):
            rows = [r for r in leadership if (str(r["group"]), str(r["member"])) == lane]
            starts = [r["bucket"].timestamp() - t0 for r in rows]
            bars = ax.broken_barh(
                _runs(starts, bucket_s), (i - 0.35, 0.7), facecolors=colour[lane[0]]
            )
            gid = f"lane-{i}"
            bars.set_gid(gid)
            total = sum(int(r["prices"]) for r in rows)
            notes[gid] = Note(
                f"{lane[0]} / {lane[1]}: {total} prices in {len(rows)} s",
                "lane",
                {"group": lane[0], "member": lane[1]},
            )
        index = {lane: i for i, lane in enumerate(lanes)}
        for k, f in enumerate(failovers):
            lane = (str(f["group"]), str(f["to_member"]))
            if lane not in index:
                continue
            x = f["at"].timestamp() - t0
            y = index[lane]
            (tick,) = ax.plot([x, x], [y - 0.4, y + 0.4], color="#c62828", linewidth=0.8)
            tick.set_gid(f"failover-{k}")
            notes[f"failover-{k}"] = Note(
                f"{f['instrument']}: {f['from_member']} → {f['to_member']}, "
                f"hand-over {_seconds(f['handover_s'])}",
                "failover",
                {"instrument": str(f["instrument"])},
            )
        ax.set_yticks(range(len(lanes)), [f"{g} / {m}" for g, m in lanes])
        ax.set_ylim(len(lanes) - 0.5, -0.5)
        ax.set_xlabel(f"time since {first:%H:%M:%S} (s)")
        ax.grid(axis="x", color="#ddd", linewidth=0.6)
        ax.set_axisbelow(True)
        return svg(fig, "timeline", notes)


def silences_svg(items: Sequence[tuple[str, float]]) -> str:
    """The longest silence per instrument, one horizontal bar each, the value at its end."""
    if not items:
        return _none("(none)")
    with style():
        fig = figure(_W, 0.7 + 0.22 * len(items))
        ax = fig.add_subplot()
        labels = [name for name, _ in items]
        values = [v for _, v in items]
        bars = ax.barh(range(len(items)), values, color=PALETTE[0], height=0.7)
        ax.bar_label(bars, [f"{v:.3f} s" for v in values], padding=3, fontsize=8)
        ax.set_yticks(range(len(items)), labels)
        ax.set_ylim(len(items) - 0.5, -0.5)
        ax.set_xlabel("longest silence on prices (s)")
        ax.margins(x=0.08)
        return svg(fig, "silences")


def latency_svg(bins: Sequence[tuple[float, float, int]]) -> str:
    """The latency distribution: ``bins`` are (low ms, high ms, prices), log-spaced."""
    counted = [b for b in bins if b[2] > 0]
    if not counted:
        return _none("no latencies (no relay_ns headers)")
    notes: dict[str, Note] = {}
    with style():
        fig = figure(_W, 3.0)
        ax = fig.add_subplot()
        for k, (lo, hi, n) in enumerate(counted):
            (bar,) = ax.bar(lo, n, width=hi - lo, align="edge", color=PALETTE[2], linewidth=0)
            bar.set_gid(f"bin-{k}")
            below = "≤ " if lo <= LATENCY_FLOOR_MS else f"{lo:.3g} to "
            notes[f"bin-{k}"] = Note(f"{below}{hi:.3g} ms: {n} prices", "bin")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(min(b[0] for b in counted), max(b[1] for b in counted))
        ax.set_ylim(0.8, max(b[2] for b in counted) * 1.5)
        for axis, unit in ((ax.xaxis, "ms"), (ax.yaxis, "")):
            axis.set_major_formatter(_Plain(unit))
            axis.set_minor_formatter(_Plain(unit))
        ax.set_xlabel("latency, source time → relay (ms, log scale)")
        ax.set_ylabel("prices (log scale)")
        ax.grid(which="major", color="#ddd", linewidth=0.6)
        ax.set_axisbelow(True)
        return svg(fig, "latency", notes)


class _Plain(LogFormatter):
    """Log-axis tick labels as plain numbers (``0.1 ms``, ``20 ms``, ``1000``), not powers of
    ten; minor ticks labelled too when the axis spans too few decades for the major ones."""

    def __init__(self, unit: str) -> None:
        super().__init__(labelOnlyBase=False)
        self._unit = unit

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return f"{x:g} {self._unit}".strip()


def _seconds(x: object) -> str:
    return f"{x:.3f} s" if isinstance(x, float) else "?"
