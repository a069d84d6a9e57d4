"""The pipeline's report: every table as Parquet, and one self-contained HTML page.

The page opens with the exactly-once verdict, then charts a person can read at a glance — the
leadership timeline per group (who published when, with each fail-over marked), the longest
silence per instrument, the end-to-end latency distribution — and the tables behind them.
The charts are matplotlib's, inlined as SVG (:mod:`pricing_ha.pipeline.report_charts`).
No scripts, fonts or styles from elsewhere: it opens anywhere, offline.
"""

from __future__ import annotations

import html
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
from pricing_ha.pipeline.report_charts import (
    LATENCY_FLOOR_MS,
    latency_svg,
    silences_svg,
    timeline_svg,
)

__all__ = ["ReportResult", "ingest_and_report", "render_html", "report_job"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1060px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
svg { max-width: 100%; height: auto; }
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


def render_html(
    verdict: ReconcileResult,
    *,
    availability: Sequence[Row],
    failovers: Sequence[Row],
    leadership: Sequence[Row],
    first_delivery: Sequence[Row],
    latency_bins: Sequence[tuple[float, float, int]],
    bars: Sequence[Row],
) -> str:
    """The report page (see the module docstring); ``latency_bins`` are (low ms, high ms,
    prices), log-spaced (:func:`_latency_bins`)."""
    css = "ok" if verdict.ok else "bad"
    silences = [(str(r["instrument"]), float(r["longest_silence_s"] or 0.0)) for r in availability]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>pricing-ha pipeline report"
        f"</title><style>{_STYLE}</style></head><body>",
        "<h1>pricing-ha: availability report</h1>",
        f'<p class="{css}">{_esc(verdict.render(limit=0).splitlines()[0])}</p>',
        "<h2>Leadership timeline (prices.raw; red ticks: a change of publishing member)</h2>",
        timeline_svg(leadership, failovers),
        "<h2>Longest silence on prices, per instrument</h2>",
        silences_svg(silences),
        "<h2>End-to-end latency (source time → relay), all prices</h2>",
        latency_svg(latency_bins),
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


def _latency_bins(inputs: Inputs, per_decade: int = 10) -> list[tuple[float, float, int]]:
    """(low ms, high ms, prices) per log-spaced bin (``per_decade`` bins in each power of ten)
    of the source-to-relay latency, empty bins between the first and the last included;
    latencies at or below :data:`LATENCY_FLOOR_MS` fall in the first bin."""
    ms = F.greatest(
        (F.col("relay_ns") - F.col("source_time_ns")) / F.lit(1e6), F.lit(LATENCY_FLOOR_MS)
    )
    idx = F.floor(F.log10(ms) * F.lit(per_decade)).alias("i")
    counts = inputs.prices.where(F.col("relay_ns").isNotNull()).groupBy(idx).count().collect()
    by = {int(r["i"]): int(r["count"]) for r in counts if r["i"] is not None}
    if not by:
        return []
    return [
        (10 ** (i / per_decade), 10 ** ((i + 1) / per_decade), by.get(i, 0))
        for i in range(min(by), max(by) + 1)
    ]


def report_job(inputs: Inputs, out: Path, bar_interval_s: int = 60) -> ReportResult:
    """Run availability, reconcile and bars into ``out`` and write ``out/report.html``."""
    tables = availability_job(inputs, out)
    verdict = reconcile_job(inputs, out)
    bars = bars_job(inputs, out, bar_interval_s)

    def rows(name: str) -> list[Row]:
        return [r.asDict() for r in tables[name].collect()]

    availability = sorted(rows("availability"), key=lambda r: str(r["instrument"]))
    page = render_html(
        verdict,
        availability=availability,
        failovers=sorted(rows("failovers"), key=lambda r: (r["at"], r["group"], r["instrument"])),
        leadership=rows("leadership"),
        first_delivery=sorted(rows("first_delivery"), key=lambda r: str(r["group"])),
        latency_bins=_latency_bins(inputs),
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
