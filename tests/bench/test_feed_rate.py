"""The feed-rate benchmark's figures from samples: pace, lateness, CPU per quote, the headline."""

from __future__ import annotations

from typing import Any

import pytest

from bench.price_path.feed_pace import Sample, cpu_over, first_reaching, headline, step_figures


def _steady(
    rate: float, n: int, *, start: float = 10.0, cpu_per_record_s: float = 10e-6
) -> list[Sample]:
    """Samples every 0.1 s of a producer landing ``rate`` records/s from ``start`` until ``n``."""
    out = [Sample(start - 0.1, 0, {"feed": 1.0})]
    t, records = start, 0
    while records < n:
        records = min(n, records + round(rate * 0.1))
        out.append(Sample(t, records, {"feed": 1.0 + records * cpu_per_record_s}))
        t += 0.1
    out.append(Sample(t, n, {}))  # the process has exited
    return out


def test_first_reaching_finds_the_first_sample_at_or_above_a_count() -> None:
    """Counts only grow, so the first sample at >= n is found; none when never reached."""
    samples = [Sample(0.0, 0), Sample(1.0, 5), Sample(2.0, 9)]
    assert first_reaching(samples, 5) == samples[1]
    assert first_reaching(samples, 6) == samples[2]
    assert first_reaching(samples, 10) is None


def test_a_step_on_schedule_paces_with_its_cpu_per_record() -> None:
    """A feed landing exactly R/s is paced, on time, at the CPU per record it spent."""
    samples = _steady(20_000, 200_000, cpu_per_record_s=8e-6)
    step = step_figures(
        samples, n=200_000, offered_per_s=20_000, started=9.0, warm_s=2.0, process="feed"
    )
    assert step["paced"] is True
    assert step["achieved_over_offered"] == pytest.approx(1.0, abs=0.02)
    assert abs(step["behind_schedule_at_end_s"]) <= 0.1
    assert step["behind_schedule_at_end_quotes"] <= 2_000
    assert step["delivered_per_s"] == pytest.approx(20_000, rel=0.02)
    assert step["cpu"]["cpu_us_per_record"] == pytest.approx(8.0, rel=0.01)
    assert step["cpu"]["cpu_percent_of_a_core"] == pytest.approx(16.0, rel=0.02)
    assert step["within_one_core"] is True
    assert step["first_landed_after_start_s"] == pytest.approx(1.0)


def test_a_step_that_falls_behind_is_not_paced_and_says_by_how_much() -> None:
    """Offered 50,000/s but landing 40,000/s: 0.8 of the offer, a fifth of the step late."""
    samples = _steady(40_000, 400_000)
    step = step_figures(
        samples, n=400_000, offered_per_s=50_000, started=9.0, warm_s=2.0, process="feed"
    )
    assert step["paced"] is False
    assert step["achieved_over_offered"] == pytest.approx(0.8, abs=0.01)
    # 400,000 quotes due in 8 s took 10 s.
    assert step["behind_schedule_at_end_s"] == pytest.approx(2.0, abs=0.15)
    assert step["behind_schedule_at_end_quotes"] == pytest.approx(100_000, rel=0.1)


def test_an_incomplete_step_is_not_paced() -> None:
    """A step whose last record never landed has no pace and fails."""
    samples = _steady(10_000, 50_000)[:-20]
    step = step_figures(
        samples, n=50_000, offered_per_s=10_000, started=9.0, warm_s=1.0, process="feed"
    )
    assert step["complete"] is False
    assert step["paced"] is False


def test_cpu_over_one_core_is_reported_as_such() -> None:
    """1.5 CPU seconds per second is 150 % of a core: not within one core."""
    samples = _steady(100_000, 1_000_000, cpu_per_record_s=15e-6)
    step = step_figures(
        samples, n=1_000_000, offered_per_s=None, started=9.0, warm_s=1.0, process="feed"
    )
    assert step["cpu"]["cpu_percent_of_a_core"] == pytest.approx(150.0, rel=0.02)
    assert step["within_one_core"] is False
    assert "paced" not in step  # unpaced: no offer to pace


def test_cpu_over_needs_two_samples_of_the_process() -> None:
    """A process seen once in the window has no CPU figure (not a zero)."""
    samples = [Sample(1.0, 10, {"feed": 1.0}), Sample(2.0, 20, {})]
    assert cpu_over(samples, "feed", 0.0, 3.0)["cpu_us_per_record"] is None


def test_headline_is_the_highest_rate_paced_within_one_core() -> None:
    """Steps that were late, or over a core, do not count; the goal is met at or above it."""
    steps: list[dict[str, Any]] = [
        {"offered_per_s": 20_000, "paced": True, "within_one_core": True},
        {"offered_per_s": 35_000, "paced": True, "within_one_core": True},
        {"offered_per_s": 50_000, "paced": True, "within_one_core": False},
        {"offered_per_s": 65_000, "paced": False, "within_one_core": True},
        {"offered_per_s": None, "within_one_core": True},
    ]
    verdict = headline(steps, 50_000)
    assert verdict["highest_paced_on_one_core_per_s"] == 35_000
    assert verdict["goal_met"] is False
    steps[2]["within_one_core"] = True
    assert headline(steps, 50_000)["goal_met"] is True


def test_quotes_held_back_at_start_then_burst_do_not_flatter_the_pace() -> None:
    """A producer that lands its first second of quotes in one burst, then lands R/s, paced R:
    the pace is taken after the burst (1.0 of R, on time), not inflated by it."""
    burst = [Sample(10.0, 0, {"feed": 1.0}), Sample(10.1, 10_000, {"feed": 1.1})]
    rest = _steady(10_000, 90_000, start=10.2)[1:]
    samples = burst + [
        Sample(s.t, s.records + 10_000, {k: v + 0.1 for k, v in s.cpu_s.items()}) for s in rest
    ]
    step = step_figures(
        samples, n=100_000, offered_per_s=10_000, started=9.0, warm_s=1.0, process="feed"
    )
    assert step["achieved_over_offered"] == pytest.approx(1.0, abs=0.02)
    assert abs(step["behind_schedule_at_end_s"]) <= 0.15
