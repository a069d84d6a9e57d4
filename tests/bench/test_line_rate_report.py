"""The line-rate report's memory per instrument: from peak RSS at the fewest and most
instruments, per partition count, path and role."""

from __future__ import annotations

from typing import Any

import pytest

from bench.price_path.line_rate_report import (
    latency_figures,
    latency_hz,
    latency_label,
    memory_per_instrument,
)

MIB = 2**20


def _search(kind: str, rate: float, quotes: int, hwm: dict[str, float]) -> dict[str, Any]:
    names = {
        "product": {"publisher": ["p1-a", "p2-a"], "relay": ["relay-r1", "relay-r2"]},
        "reference": {"publisher": ["fwd-p1", "fwd-p2"], "relay": ["fwd-relay"]},
    }[kind]
    per = {n: {"VmRSS": v - 1, "VmHWM": v} for role, v in hwm.items() for n in names[role]}
    per[names["publisher"][1]]["VmHWM"] -= 5  # the role's figure is its largest process
    step = {"offered_per_s": rate, "quotes": quotes, "memory": {"per_process_mib": per}}
    return {"steps": [step]}


def _searches(relay_many: float) -> dict[tuple[int, int, str], list[dict[str, Any]]]:
    out = {}
    for kind in ("product", "reference"):
        out[(100, 4, kind)] = [_search(kind, 10_000, 100_000, {"publisher": 60, "relay": 70})]
        out[(100_000, 4, kind)] = [
            _search(kind, 10_000, 100_000, {"publisher": 80, "relay": relay_many})
        ]
    return out


def test_bytes_per_instrument_from_the_largest_process_of_each_role() -> None:
    """20 MiB more publisher and 30 MiB more relay over 99,900 more instruments."""
    memory = memory_per_instrument(_searches(100.0), [100, 100_000], [4])
    assert memory is not None
    product = memory["4_partitions"]["product"]["bytes_per_instrument_max"]
    assert product["publisher"] == pytest.approx(20 * MIB / 99_900, abs=1)
    assert product["relay"] == pytest.approx(30 * MIB / 99_900, abs=1)
    assert memory["product_bytes_per_instrument_max"] == product
    assert "VmHWM" in memory["method"]


def test_only_the_instruments_a_step_saw_count() -> None:
    """A step that sent 50,000 quotes saw 50,000 of 100,000 instruments: twice the bytes each."""
    searches = _searches(100.0)
    for kind in ("product", "reference"):
        searches[(100_000, 4, kind)][0]["steps"][0]["quotes"] = 50_000
    memory = memory_per_instrument(searches, [100, 100_000], [4])
    assert memory is not None
    rounds = memory["4_partitions"]["product"]["rounds"]
    assert rounds[0]["instruments_seen"] == [100, 50_000]
    assert rounds[0]["relay"]["bytes_per_instrument"] == pytest.approx(30 * MIB / 49_900, abs=1)


def test_steps_at_different_rates_are_not_compared() -> None:
    """The first steps must share their offered rate, or no figure is given (and why)."""
    searches = _searches(100.0)
    searches[(100_000, 4, "product")][0]["steps"][0]["offered_per_s"] = 8_000
    memory = memory_per_instrument(searches, [100, 100_000], [4])
    assert memory is not None
    assert "problem" in memory["4_partitions"]["product"]["rounds"][0]
    assert memory["product_bytes_per_instrument_max"] == {"publisher": None, "relay": None}


def test_one_instrument_count_gives_no_memory_figure() -> None:
    """Nothing to compare with a single --instruments value."""
    assert memory_per_instrument(_searches(100.0), [100], [4]) is None


def test_a_fraction_of_the_sustained_rate_is_spread_over_the_instruments() -> None:
    """'0.8x' at 15,000/s sustained over 100 instruments is 120 Hz each; a number is itself."""
    assert latency_hz("0.8x", 15_000.0, 100) == pytest.approx(120.0)
    assert latency_hz("10", 15_000.0, 100) == 10.0
    assert latency_hz("0.8x", None, 100) is None
    assert latency_label("0.8x", 100) == "0.8x sustained"
    assert latency_label("10", 100) == "1000/s"


def _latency_run(p50: float, p99: float) -> dict[str, Any]:
    return {
        "source_to_receive": {"p50_ms": p50, "p99_ms": p99, "max_ms": p99 + 1, "n": 10},
        "hop": {"p50_ms": 1.0, "p99_ms": 2.0},
    }


def test_latency_figures_name_each_case_and_take_the_goals_from_the_first() -> None:
    """Each --latency-hz item gets its own figures; a case never run has none."""
    latencies = {
        ("10", "product"): [_latency_run(15.0, 50.0), _latency_run(17.0, 60.0)],
        ("10", "reference"): [_latency_run(12.0, 20.0)],
        ("0.8x", "product"): [_latency_run(30.0, 90.0)],
    }
    figures: dict[str, Any] = {}
    latency_figures(figures, ["10", "0.8x"], latencies, 100)
    assert figures["latency_ms"] == {"p50": 16.0, "p99": 55.0}
    assert figures["latency"]["0.8x sustained"]["product"]["p99_ms_median"] == 90.0
    assert figures["latency"]["0.8x sustained"]["reference"]["p99_ms_median"] is None


def test_the_segments_of_the_products_latency_are_summarised_per_round() -> None:
    """Each segment's p50 and p99 are medians over the rounds; the reference has none."""
    runs = [_latency_run(15.0, 50.0), _latency_run(17.0, 60.0)]
    for run, relay_p50 in zip(runs, (8.0, 10.0), strict=True):
        run["probe"] = {"segments": {"relay_to_receive": {"p50_ms": relay_p50, "p99_ms": 30.0}}}
    latencies = {("10", "product"): runs, ("10", "reference"): [_latency_run(12.0, 20.0)]}
    figures: dict[str, Any] = {}
    latency_figures(figures, ["10"], latencies, 100)
    product = figures["latency"]["1000/s"]["product"]
    assert product["segments_ms_median"] == {"relay_to_receive": {"p50": 9.0, "p99": 30.0}}
    assert figures["latency"]["1000/s"]["reference"]["segments_ms_median"] == {}


def test_a_run_warms_the_broker_up_unless_smoke_or_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The headline's first search follows a 20 s unjudged warm-up step; a smoke run and
    --warm-up-s 0 have none."""
    from bench.price_path import line_rate

    def parsed(*argv: str) -> float:
        monkeypatch.setattr("sys.argv", ["price_path", *argv])
        return float(line_rate._options().warm_up_s)

    assert parsed() == 20.0
    assert parsed("--smoke") == 0.0
    assert parsed("--warm-up-s", "0") == 0.0
