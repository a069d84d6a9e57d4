"""The figures of ``bench/election/peers.py``: each candidate's records and takeover summary,
then ratios against NELI, the README table and the console table (pure functions of the results
JSON)."""

from __future__ import annotations

import contextlib
import json
import math
import statistics
from pathlib import Path
from typing import Any

#: The NELI cases every other case is compared with, at the same setting.
REFERENCES = ("full/non-exclusive", "fast/exclusive")


def records(path: Path) -> list[dict[str, Any]]:
    """A candidate's records (a torn last line from a SIGKILL is ignored)."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
    return out


def believes_it_leads(recs: list[dict[str, Any]]) -> bool:
    """Whether the candidate's latest lead/lost record is a lead."""
    states = [r["k"] for r in recs if r["k"] in ("lead", "lost")]
    return bool(states) and states[-1] == "lead"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with five values, p99 is the largest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def takeover_summary(values: list[float]) -> dict[str, Any]:
    """n, p50, p99, max, min and mean of the takeover times (seconds)."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 0.5), 3),
        "p99": round(percentile(values, 0.99), 3),
        "max": round(max(values), 3),
        "min": round(min(values), 3),
        "mean": round(statistics.fmean(values), 3),
    }


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Each case against each reference NELI case at the same setting."""

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else round(a / b, 2)

    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for key, r in results.items():
        for ref_label in REFERENCES:
            ref = results.get(f"neli {ref_label} @{r['setting']}")
            if ref is None or ref.get("takeover_s", {}).get("n", 0) == 0 or "idle" not in ref:
                continue
            if r.get("takeover_s", {}).get("n", 0) == 0 or "idle" not in r:
                continue
            out.setdefault(key, {})[f"neli {ref_label}"] = {
                "takeover_p50": ratio(r["takeover_s"]["p50"], ref["takeover_s"]["p50"]),
                "member_cpu": ratio(
                    r["idle"]["member_cpu_pct_mean"], ref["idle"]["member_cpu_pct_mean"]
                ),
                "member_packets": ratio(
                    r["idle"]["member_packets_per_s_mean"],
                    ref["idle"]["member_packets_per_s_mean"],
                ),
            }
    return out


def configured(r: dict[str, Any]) -> str:
    """The case's settings in a few words."""
    p = r["params"]
    if r["peer"] == "neli":
        return (
            f"S={p['session_timeout_ms']} T={p['threshold_ms']} pulse={p['pulse_interval_ms']} ms"
        )
    if r["peer"] == "zookeeper":
        return f"tick={p['tick_time_ms']} session={p['session_timeout_ms']} ms"
    flags = " (server 50/500 ms)" if p["server_flags"] else ""
    return f"lease TTL={p['lease_ttl_s']} s{flags}"


def packets_by_role(idle: dict[str, Any]) -> str:
    """``leader / follower`` packets per second (followers' mean): NELI's differ the most."""
    by_role: dict[str, list[float]] = {}
    for m in idle.get("members", []):
        by_role.setdefault(m["role"], []).append(m["packets_per_s"])
    if not by_role:
        return "-"
    leader = by_role.get("leader", [])
    follower = by_role.get("follower", [])
    return " / ".join(f"{statistics.fmean(v):.1f}" if v else "-" for v in (leader, follower))


def markdown(
    results: dict[str, dict[str, Any]], rel: dict[str, dict[str, dict[str, float | None]]]
) -> str:
    """The README table: one row per case."""
    ref = REFERENCES[1]
    lines = [
        "| peer | setting | configured | takeover p50 / p99 / max (s) | n | CPU per member "
        "(% core) | packets/s per member: leader / follower | server CPU (% core) | "
        f"p50 ÷ NELI {ref} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    names = {"neli": "NELI", "zookeeper": "ZooKeeper (kazoo)", "etcd": "etcd (python-etcd3)"}
    for key, r in results.items():
        t, idle = r.get("takeover_s", {"n": 0}), r.get("idle", {})
        times = f"{t['p50']:.2f} / {t['p99']:.2f} / {t['max']:.2f}" if t["n"] else "-"
        vs = rel.get(key, {}).get(f"neli {ref}", {}).get("takeover_p50")
        peer = f"{names[r['peer']]} {r['label']}" if r["peer"] == "neli" else names[r["peer"]]
        lines.append(
            f"| {peer} | {r['setting']} | {configured(r)} | {times} | {t['n']} | "
            f"{idle.get('member_cpu_pct_mean', '-')} | {packets_by_role(idle)} | "
            f"{idle.get('server_cpu_pct', '-')} | {vs if vs is not None else '-'} |"
        )
    return "\n".join(lines)


def table(results: dict[str, dict[str, Any]]) -> str:
    """The console table."""
    head = (
        f"{'case':<46} {'p50':>7} {'p99':>7} {'max':>7} {'n':>3} {'cpu%':>6} {'pkt/s':>7}"
        f" {'srv%':>6} {'lost':>4}"
    )
    rows = [head]
    for key, r in results.items():
        t, idle = r.get("takeover_s", {"n": 0}), r.get("idle", {})

        def num(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}"

        rows.append(
            f"{key:<46} {num(t.get('p50')):>7} {num(t.get('p99')):>7} {num(t.get('max')):>7} "
            f"{t['n']:>3} {num(idle.get('member_cpu_pct_mean')):>6} "
            f"{num(idle.get('member_packets_per_s_mean')):>7} "
            f"{num(idle.get('server_cpu_pct')):>6} {r.get('spurious_losses', '-')!s:>4}"
        )
    return "\n".join(rows)
