"""The pipeline's report: every table as Parquet, and one self-contained HTML page (inline SVG).

The page opens with the exactly-once verdict, then charts a person can read at a glance — the
leadership timeline per group (who published when, with each fail-over marked), the longest
silence per instrument, the end-to-end latency distribution — and the tables behind them.
No scripts, fonts or styles from elsewhere: it opens anywhere, offline.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from pricing_ha.pipeline.jobs import (
    Inputs,
    ReconcileResult,
    availability_job,
    bars_job,
    reconcile_job,
)

__all__ = ["ReportResult", "ingest_and_report", "render_html", "report_job"]

_W, _LEFT, _RIGHT = 1000, 150, 20
_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1060px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
svg text { font-size: 11px; fill: #333; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #c62828; font-weight: bold; }
.note { color: #666; font-size: 12px; }
"""

Row = dict[str, Any]


@dataclass(frozen=True)
class ReportResult:
    """What the report job found and where it wrote it."""

    verdict: ReconcileResult
    html: Path


def _esc(x: object) -> str:
    return html.escape(str(x))


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    if isinstance(x, datetime):
        return x.strftime("%H:%M:%S.%f")[:-3]
    if isinstance(x, list):
        return ", ".join(map(str, x[:6])) + (" ..." if len(x) > 6 else "")
    return "" if x is None else str(x)


def _table(rows: Sequence[Row], limit: int = 200) -> str:
    if not rows:
        return '<p class="note">(none)</p>'
    cols = list(rows[0])
    head = "".join(f"<th>{_esc(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(_fmt(r[c]))}</td>" for c in cols) + "</tr>"
        for r in rows[:limit]
    )
    more = (
        f'<p class="note">{len(rows) - limit} more rows in Parquet</p>' if len(rows) > limit else ""
    )
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _timeline(leadership: Sequence[Row], failovers: Sequence[Row]) -> str:
    """One lane per (group, member): a block per bucket it published in; fail-overs as ticks."""
    if not leadership:
        return '<p class="note">no raw prices</p>'
    lanes = sorted({(r["group"], r["member"]) for r in leadership})
    t0 = min(r["bucket"] for r in leadership).timestamp()
    t1 = max(r["bucket"] for r in leadership).timestamp() + 1
    span = max(t1 - t0, 1.0)
    width = _W - _LEFT - _RIGHT
    lane_h, top = 18, 10
    height = top + lane_h * len(lanes) + 30
    groups = sorted({g for g, _ in lanes})
    colour = {g: _PALETTE[i % len(_PALETTE)] for i, g in enumerate(groups)}
    out = [f'<svg width="{_W}" height="{height}" role="img" aria-label="leadership timeline">']
    for i, (group, member) in enumerate(lanes):
        y = top + i * lane_h
        out.append(f'<text x="4" y="{y + 12}">{_esc(group)} / {_esc(member)}</text>')
    index = {lane: i for i, lane in enumerate(lanes)}
    bucket_w = max(width / span, 1.0)
    for r in leadership:
        i = index[(r["group"], r["member"])]
        x = _LEFT + (r["bucket"].timestamp() - t0) / span * width
        out.append(
            f'<rect x="{x:.1f}" y="{top + i * lane_h + 2}" width="{bucket_w:.1f}" '
            f'height="{lane_h - 4}"'
            f' fill="{colour[r["group"]]}"><title>{_esc(r["member"])} at {_fmt(r["bucket"])}: '
            f"{r['prices']} prices</title></rect>"
        )
    for f in failovers:
        lane = (f["group"], f["to_member"])
        if lane not in index:
            continue
        x = _LEFT + (f["at"].timestamp() - t0) / span * width
        y = top + index[lane] * lane_h
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + lane_h}" stroke="#c62828" '
            f'stroke-width="2"><title>{_esc(f["instrument"])}: {_esc(f["from_member"])} → '
            f"{_esc(f['to_member'])}, hand-over {_fmt(f['handover_s'])} s</title></line>"
        )
    y_axis = top + lane_h * len(lanes) + 14
    for k in range(6):
        x = _LEFT + k * width / 5
        out.append(
            f'<text x="{x:.0f}" y="{y_axis}" text-anchor="middle">+{span * k / 5:.0f} s</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _hbars(items: Sequence[tuple[str, float]], unit: str) -> str:
    if not items:
        return '<p class="note">(none)</p>'
    top = max(v for _, v in items) or 1.0
    width = _W - _LEFT - _RIGHT - 60
    h = 16
    out = [f'<svg width="{_W}" height="{len(items) * h + 10}" role="img">']
    for i, (label, v) in enumerate(items):
        y = 4 + i * h
        w = v / top * width
        out.append(f'<text x="4" y="{y + 11}">{_esc(label)}</text>')
        out.append(f'<rect x="{_LEFT}" y="{y}" width="{w:.1f}" height="{h - 3}" fill="#4e79a7"/>')
        out.append(f'<text x="{_LEFT + w + 4:.1f}" y="{y + 11}">{v:.3f} {unit}</text>')
    out.append("</svg>")
    return "".join(out)


def _histogram(bins: Sequence[tuple[float, int]], width_ms: float) -> str:
    if not bins:
        return '<p class="note">no latencies (no relay_ns headers)</p>'
    top = max(c for _, c in bins)
    n = len(bins)
    plot_w, plot_h = _W - _LEFT - _RIGHT, 160
    bw = plot_w / n
    out = [f'<svg width="{_W}" height="{plot_h + 40}" role="img" aria-label="latency histogram">']
    for i, (lo, c) in enumerate(bins):
        h = c / top * plot_h
        out.append(
            f'<rect x="{_LEFT + i * bw:.1f}" y="{10 + plot_h - h:.1f}" width="{max(bw - 1, 1):.1f}"'
            f' height="{h:.1f}" fill="#59a14f">'
            f"<title>{lo:.1f} to {lo + width_ms:.1f} ms: {c}</title></rect>"
        )
    for k in range(0, n, max(1, n // 8)):
        x = _LEFT + k * bw
        out.append(f'<text x="{x:.0f}" y="{plot_h + 26}">{bins[k][0]:.0f} ms</text>')
    out.append(f'<text x="4" y="20">{top} prices</text></svg>')
    return "".join(out)


def render_html(
    verdict: ReconcileResult,
    *,
    availability: Sequence[Row],
    failovers: Sequence[Row],
    leadership: Sequence[Row],
    first_delivery: Sequence[Row],
    latency_bins: Sequence[tuple[float, int]],
    bin_ms: float,
    bars: Sequence[Row],
) -> str:
    """The report page (see the module docstring)."""
    css = "ok" if verdict.ok else "bad"
    silences = [(str(r["instrument"]), float(r["longest_silence_s"] or 0.0)) for r in availability]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>pricing-ha pipeline report"
        f"</title><style>{_STYLE}</style></head><body>",
        "<h1>pricing-ha: availability report</h1>",
        f'<p class="{css}">{_esc(verdict.render(limit=0).splitlines()[0])}</p>',
        "<h2>Leadership timeline (prices.raw; red ticks: a change of publishing member)</h2>",
        _timeline(leadership, failovers),
        "<h2>Longest silence on prices, per instrument</h2>",
        _hbars(silences, "s"),
        "<h2>End-to-end latency (source time → relay), all prices</h2>",
        _histogram(latency_bins, bin_ms),
        "<h2>Per instrument</h2>",
        _table(availability),
        "<h2>Share of prices delivered first, per group</h2>",
        _table(first_delivery),
        "<h2>Fail-overs (change of publishing member per group and instrument)</h2>",
        _table(failovers),
        "<h2>Offending rows (reconciliation)</h2>",
        _table(verdict.offending),
        "<h2>Bars (first rows)</h2>",
        _table(bars, limit=40),
        "</body></html>",
    ]
    return "\n".join(parts)


def _latency_bins(
    inputs: Inputs, p99_ms: float, n: int = 40
) -> tuple[list[tuple[float, int]], float]:
    width = max(p99_ms * 1.5 / n, 0.1) if p99_ms > 0 else 1.0
    ms = (F.col("relay_ns") - F.col("source_time_ns")) / F.lit(1e6)
    idx = F.least(F.floor(ms / F.lit(width)), F.lit(n - 1)).alias("i")
    counts = inputs.prices.where(F.col("relay_ns").isNotNull()).groupBy(idx).count().collect()
    by = {int(r["i"]): int(r["count"]) for r in counts if r["i"] is not None}
    if not by:
        return [], width
    lo = min(0, *by)
    return [(i * width, by.get(i, 0)) for i in range(lo, n)], width


def report_job(inputs: Inputs, out: Path, bar_interval_s: int = 60) -> ReportResult:
    """Run availability, reconcile and bars into ``out`` and write ``out/report.html``."""
    tables = availability_job(inputs, out)
    verdict = reconcile_job(inputs, out)
    bars = bars_job(inputs, out, bar_interval_s)

    def rows(name: str) -> list[Row]:
        return [r.asDict() for r in tables[name].collect()]

    availability = sorted(rows("availability"), key=lambda r: str(r["instrument"]))
    p99 = max((float(r["latency_p99_ms"] or 0.0) for r in availability), default=0.0)
    bins, width = _latency_bins(inputs, p99 if math.isfinite(p99) else 0.0)
    page = render_html(
        verdict,
        availability=availability,
        failovers=sorted(rows("failovers"), key=lambda r: (r["at"], r["group"], r["instrument"])),
        leadership=rows("leadership"),
        first_delivery=sorted(rows("first_delivery"), key=lambda r: str(r["group"])),
        latency_bins=bins,
        bin_ms=width,
        bars=[
            r.asDict()
            for r in bars.drop("date").orderBy("instrument", "bar_start").limit(40).collect()
        ],
    )
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return ReportResult(verdict, path)


def ingest_and_report(
    config_path: Path, out: Path, *, master: str = "local[*]", bar_interval_s: int = 10
) -> ReportResult:
    """Land the topics of the configuration at ``config_path`` in ``out`` (batch, to their end)
    and make the report from the landed records: what ``pricing-ha demo --report`` runs before
    its local Kafka stops."""
    from pricing_ha.config import load_app_config
    from pricing_ha.pipeline.ingest import ingest_batch
    from pricing_ha.pipeline.jobs import load_inputs
    from pricing_ha.pipeline.session import spark_session

    cfg = load_app_config(config_path)
    spark = spark_session(master)
    ingest_batch(spark, cfg, out)
    return report_job(load_inputs(spark, cfg, out), out, bar_interval_s)
