"""The report of ``bench/price_path/line_rate.py``: medians over rounds, memory per instrument, the
closing table.

Memory per instrument (the scale goal: <= 300 bytes in the relay and the publishers) is derived,
per partition count, path and role, from two searches that differ only in their instrument
count (the fewest and the most of ``--instruments``): the first step of each (both at the
search's start rate, so the same offered load) reports every process's VmHWM (its peak resident
set since it started; each case starts fresh processes); the role's figure is the largest
process of the role. Bytes per instrument = (HWM at many - HWM at few) / (instruments seen at
many - at few), where a step sees min(instruments, quotes sent) instruments (the feed quotes every
instrument once per round). The resolution is about 1 byte (HWM is kept to 0.1 MiB).
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.price_path.cases import ROLES

KINDS = ("product", "reference")
MEMORY_ROLES = ("publisher", "relay")
MEMORY_METHOD = (
    "per partition count, path and role: (VmHWM of the role's largest process at the most "
    "instruments - at the fewest) / (instruments seen - instruments seen), each from the first "
    "step of its search (same offered rate); instruments seen = min(instruments, quotes sent)"
)


def median(values: list[float | None], nd: int = 1) -> float | None:
    """The median of the values that are not None, rounded; None if there are none."""
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), nd) if kept else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b to 3 places, None if either is missing (or b is 0)."""
    return round(a / b, 3) if a is not None and b else None


def summarise_search(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one kind's searches at one combination."""
    tops = [r for r in runs if r["highest_sustained_per_s"] is not None]
    cpu_roles = ("publisher_each", "relay_all", "broker", "feed")
    return {
        "highest_sustained_per_s_each_round": [r["highest_sustained_per_s"] for r in runs],
        "sustained_per_s_median": median([r["highest_sustained_per_s"] for r in runs], 0),
        "any_lower_bound": any(r["lower_bound"] for r in runs),
        "any_limited_by_feed": any(r["limited_by_feed"] for r in runs),
        "cpu_us_per_price_median": {
            role: median([t["at_highest"]["cpu"]["cpu_us_per_price_by_role"][role] for t in tops])
            for role in cpu_roles
        },
        "peak_hwm_mib_max": {
            role: max(
                (
                    v
                    for t in tops
                    if (v := t["at_highest"]["memory"]["peak_hwm_mib_by_role"].get(role))
                    is not None
                ),
                default=None,
            )
            for role in ("publisher", "relay", "broker", "feed")
        },
        "output_checks_ok": [r["output_check"]["ok"] for r in tops],
        "runs": runs,
    }


def summarise_latency(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one kind's latency cases at one rate."""
    lat = [r["source_to_receive"] for r in runs]
    hops = [r["hop"] for r in runs]
    return {
        "p50_ms_median": median([x.get("p50_ms") for x in lat]),
        "p99_ms_median": median([x.get("p99_ms") for x in lat]),
        "hop_p50_ms_median": median([x.get("p50_ms") for x in hops]),
        "hop_p99_ms_median": median([x.get("p99_ms") for x in hops]),
        "max_ms_max": max((x.get("max_ms", 0.0) for x in lat), default=None),
        "n_total": sum(x.get("n", 0) for x in lat),
        "segments_ms_median": _segments(runs),
        "runs": runs,
    }


def _segments(runs: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Medians over the rounds of each latency segment's p50 and p99 (the product's prices
    carry the stamps: :mod:`bench.price_path.latency_probe`); none for the reference."""
    found: dict[str, dict[str, list[float | None]]] = {}
    for run in runs:
        for name, pct in run.get("probe", {}).get("segments", {}).items():
            entry = found.setdefault(name, {"p50": [], "p99": []})
            entry["p50"].append(pct.get("p50_ms"))
            entry["p99"].append(pct.get("p99_ms"))
    return {name: {q: median(v) for q, v in entry.items()} for name, entry in found.items()}


def rate_item(item: str, sustained: float | None) -> float | None:
    """One item of a rate option (``--latency-hz``, ``--direct-rate``): a number as given, or
    ``0.8x`` as 0.8 x the round's sustained product rate, to a whole price a second (``None``
    when the round sustained no rate)."""
    if item.endswith("x"):
        return round(float(item[:-1]) * sustained) if sustained else None
    return float(item)


def latency_hz(spec: str, sustained: float | None, instruments: int) -> float | None:
    """One ``--latency-hz`` item as Hz per instrument: a number is one already; a fraction of
    the sustained rate (:func:`rate_item`) is spread over ``instruments``."""
    rate = rate_item(spec, sustained)
    return rate / instruments if rate is not None and spec.endswith("x") else rate


def latency_label(spec: str, instruments: int) -> str:
    """A latency case's name in the figures: ``1000/s``, or ``0.8x sustained``."""
    return f"{spec} sustained" if spec.endswith("x") else f"{instruments * float(spec):.0f}/s"


def latency_figures(
    figures: dict[str, Any],
    specs: list[str],
    latencies: dict[tuple[str, str], list[dict[str, Any]]],
    instruments: int,
) -> None:
    """Medians of the latency cases (each ``--latency-hz`` item), and the goals' keys (the
    first item's)."""
    figures["latency"] = {
        latency_label(spec, instruments): {
            kind: summarise_latency(latencies.get((spec, kind), [])) for kind in KINDS
        }
        for spec in specs
    }
    first = figures["latency"][latency_label(specs[0], instruments)]["product"]
    # The goals' keys: latency feed -> subscriber and one broker hop, measured side by side
    # in the same window (the first latency rate).
    figures["latency_ms"] = {"p50": first["p50_ms_median"], "p99": first["p99_ms_median"]}
    figures["hop_ms"] = {"p50": first["hop_p50_ms_median"], "p99": first["hop_p99_ms_median"]}


def table(figures: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """Rows of the closing table: figure, product, reference, ratio."""
    rows: list[tuple[str, Any, Any, Any]] = []
    for combo, c in figures["throughput"].items():
        p, r = c["product"]["sustained_per_s_median"], c["reference"]["sustained_per_s_median"]
        rows.append((f"sustained prices/s ({combo})", p, r, ratio(p, r)))
    for rate, c in figures.get("latency", {}).items():
        for q in ("p50_ms_median", "p99_ms_median"):
            p, r = c["product"][q], c["reference"][q]
            rows.append((f"latency {q.split('_')[0]} ms at {rate}", p, r, ratio(p, r)))
        for q in ("hop_p50_ms_median", "hop_p99_ms_median"):
            p, r = c["product"][q], c["reference"][q]
            rows.append((f"one broker hop {q.split('_')[1]} ms at {rate}", p, r, ratio(p, r)))
    base = next(iter(figures["throughput"].values()))
    for role, label in (("publisher_each", "publisher (each)"), ("relay_all", "relay (all)")):
        p = base["product"]["cpu_us_per_price_median"][role]
        r = base["reference"]["cpu_us_per_price_median"][role]
        rows.append((f"CPU µs/price {label}", p, r, ratio(p, r)))
    for role in ("broker", "feed"):
        p = base["product"]["cpu_us_per_price_median"][role]
        r = base["reference"]["cpu_us_per_price_median"][role]
        rows.append((f"CPU µs/price {role}", p, r, ratio(p, r)))
    for role in ("publisher", "relay", "broker"):
        p = base["product"]["peak_hwm_mib_max"][role]
        r = base["reference"]["peak_hwm_mib_max"][role]
        rows.append((f"peak RSS MiB {role} (per process)", p, r, ratio(p, r)))
    return rows


def print_table(rows: list[tuple[str, Any, Any, Any]]) -> None:
    """Print the closing table."""
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}} | {'product':>10} | {'reference':>10} | {'ratio':>6}")
    print(f"{'-' * width}-+-{'-' * 10}-+-{'-' * 10}-+-{'-' * 6}")
    for name, p, r, q in rows:
        cells = ["-" if v is None else f"{v:g}" for v in (p, r, q)]
        print(f"{name:<{width}} | {cells[0]:>10} | {cells[1]:>10} | {cells[2]:>6}")


def _role_hwm_mib(step: dict[str, Any], kind: str, role: str) -> float | None:
    """VmHWM (MiB) of the largest process of ``role`` at the end of ``step``."""
    per = step["memory"]["per_process_mib"]
    values = [per[n]["VmHWM"] for n in ROLES[kind][role] if "VmHWM" in per.get(n, {})]
    return max(values) if values else None


def bytes_per_instrument(
    few: dict[str, Any], many: dict[str, Any], kind: str, few_n: int, many_n: int
) -> dict[str, Any]:
    """Per role, the memory an instrument costs, from the first steps of two searches."""
    a, b = few["steps"][0], many["steps"][0]
    seen_a, seen_b = min(few_n, a["quotes"]), min(many_n, b["quotes"])
    out: dict[str, Any] = {
        "offered_per_s": [a["offered_per_s"], b["offered_per_s"]],
        "instruments_seen": [seen_a, seen_b],
    }
    if a["offered_per_s"] != b["offered_per_s"] or seen_b <= seen_a:
        out["problem"] = "the steps differ in rate, or saw no more instruments"
        return out
    for role in MEMORY_ROLES:
        ha, hb = _role_hwm_mib(a, kind, role), _role_hwm_mib(b, kind, role)
        per = None if ha is None or hb is None else round((hb - ha) * 2**20 / (seen_b - seen_a))
        out[role] = {"hwm_mib": [ha, hb], "bytes_per_instrument": per}
    return out


def memory_per_instrument(
    searches: dict[tuple[int, int, str], list[dict[str, Any]]],
    instruments: list[int],
    partitions: list[int],
) -> dict[str, Any] | None:
    """Bytes per instrument per partition count, path and role (the module docstring), each
    round's and the largest over rounds; None with fewer than two instrument counts."""
    few, many = min(instruments), max(instruments)
    if few == many:
        return None
    out: dict[str, Any] = {"method": MEMORY_METHOD, "instruments": [few, many]}
    worst: dict[str, int | None] = dict.fromkeys(MEMORY_ROLES)
    for p in partitions:
        at_p: dict[str, Any] = {}
        for kind in KINDS:
            rounds = [
                bytes_per_instrument(s_few, s_many, kind, few, many)
                for s_few, s_many in zip(
                    searches[(few, p, kind)], searches[(many, p, kind)], strict=True
                )
                if s_few["steps"] and s_many["steps"]
            ]
            largest = {
                role: max(
                    (v for r in rounds if (v := r.get(role, {}).get("bytes_per_instrument"))
                     is not None),
                    default=None,
                )
                for role in MEMORY_ROLES
            }  # fmt: skip
            at_p[kind] = {"bytes_per_instrument_max": largest, "rounds": rounds}
            if kind == "product":
                for role, v in largest.items():
                    if v is not None:
                        w = worst[role]
                        worst[role] = v if w is None else max(w, v)
        out[f"{p}_partitions"] = at_p
    out["product_bytes_per_instrument_max"] = worst
    return out
