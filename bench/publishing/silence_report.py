"""The publish-silence benchmark's report: per-scenario figures, one line per run, the table."""

from __future__ import annotations

from typing import Any

from bench.common.report import summary


def summarise(values: list[Any]) -> dict[str, float] | None:
    """:func:`summary` of the values that are not None (None if there are none)."""
    known = [v for v in values if v is not None]
    return summary(known) if known else None


def figures(key: str, rs: list[dict[str, Any]]) -> dict[str, Any]:
    """Summaries over the runs of one scenario at one S, plus the runs themselves."""
    fig: dict[str, Any] = {
        name: summarise([r[name] for r in rs])
        for name in (
            "worst_silence_s",
            "feed_worst_gap_s",
            "worst_excess_over_feed_s",
            "worst_latency_s",
            "baseline_worst_silence_s",
            "load_average_1m_at_kill",
        )
    }
    fig["missing_from_union_total"] = sum(r["missing_from_union"] for r in rs)
    fig["no_seq_missing"] = all(r["missing_from_union"] == 0 for r in rs)
    if key == "member":
        fig["p1_own_worst_silence_s"] = summarise([r["p1_own_worst_silence_s"] for r in rs])
        fig["p1_missing_total"] = sum(r["p1_missing"] for r in rs)
    if key.startswith("pause"):
        for name in ("pause_s", "worst_silence_minus_pause_s", "resume_delay_s"):
            fig[name] = summarise([r[name] for r in rs])
        fig["runs_with_an_instrument_silent_after_resume"] = sum(
            bool(r["instruments_silent_after_resume"]) for r in rs
        )
        fig["resume_delay_by_group_s"] = {
            g: summarise([r["resume_delay_by_group_s"][g] for r in rs]) for g in ("p1", "p2")
        }
    fig["per_run"] = rs
    return fig


def run_line(i: int, key: str, r: dict[str, Any]) -> str:
    """One run's figures, on one line."""
    extra = ""
    if key == "member":
        extra = f", p1 alone {r['p1_own_worst_silence_s']:.3f} s"
    if key.startswith("pause"):
        delay = r["resume_delay_s"]
        extra = (
            f", paused {r['pause_s']:.3f} s, silence - pause "
            f"{r['worst_silence_minus_pause_s']:.3f} s, resume delay "
            + (f"{delay:.3f} s" if delay is not None else "NONE")
            + f" ({r['resume_delay_instrument']}; by group {r['resume_delay_by_group_s']})"
        )
    base = r["baseline_worst_silence_s"]
    return (
        f"run {i} {key}: worst union silence {r['worst_silence_s']:.3f} s "
        f"({r['worst_instrument']}), feed's worst gap {r['feed_worst_gap_s']:.3f} s, "
        f"excess {r['worst_excess_over_feed_s']:.3f} s, baseline "
        + (f"{base:.3f} s" if base is not None else "-")
        + f"{extra}; missing {r['missing_from_union']} of {r['feed_quotes']} (load "
        f"{r['load_average_1m_at_kill']:.1f})"
    )


def table(by_session: dict[str, dict[str, Any]]) -> str:
    """A compact table of every (S, scenario): min/median/max over the runs."""

    def mmm(fig: dict[str, Any], name: str) -> str:
        s = fig.get(name)
        return f"{s['min']:.3f}/{s['median']:.3f}/{s['max']:.3f}" if s else "-"

    def worst(fig: dict[str, Any], name: str) -> str:
        s = fig.get(name)
        return f"{s['max']:.3f}" if s else "-"

    head = (
        f"{'S ms':>6} {'scenario':<10} {'n':>2} {'union silence s':>20} {'-feed max':>9} "
        f"{'-pause max':>10} {'resume delay s':>20} {'feed gap':>8} {'missing':>7} {'load':>5}"
    )
    lines = [
        "union silence, resume delay: min/median/max over runs of the worst instrument;",
        "-feed: worst (union gap - feed gap); -pause: worst silence - pause; feed gap: max",
        head,
        "-" * len(head),
    ]
    for ms, per in by_session.items():
        for key, fig in per.items():
            if not isinstance(fig, dict) or "per_run" not in fig:
                continue
            load = fig["load_average_1m_at_kill"]
            lines.append(
                f"{ms:>6} {key:<10} {len(fig['per_run']):>2} {mmm(fig, 'worst_silence_s'):>20} "
                f"{worst(fig, 'worst_excess_over_feed_s'):>9} "
                f"{worst(fig, 'worst_silence_minus_pause_s'):>10} "
                f"{mmm(fig, 'resume_delay_s'):>20} {worst(fig, 'feed_worst_gap_s'):>8} "
                f"{fig['missing_from_union_total']:>7} "
                + (f"{load['median']:>5.1f}" if load else f"{'-':>5}")
            )
    return "\n".join(lines)
