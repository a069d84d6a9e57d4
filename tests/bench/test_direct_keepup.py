"""The direct-subscriber keep-up check's judgements: progress from /metrics, pace, exactly once."""

from __future__ import annotations

from typing import Any

from bench.price_path.direct_keepup import (
    delivered_from_metrics,
    direct_rates,
    exactly_once,
    keepup_figures,
    publishers_behind,
)

METRICS = """# HELP pricing_ha_prices_delivered_total Prices delivered to this subscriber
# TYPE pricing_ha_prices_delivered_total counter
pricing_ha_prices_delivered_total{partition="0"} 1200.0
pricing_ha_prices_delivered_total{partition="1"} 34.0
pricing_ha_prices_delivered_created{partition="0"} 1.7e9
pricing_ha_duplicates_dropped_total{partition="0",stage="subscriber"} 7.0
"""


def test_delivered_is_summed_over_partitions() -> None:
    """Every partition's count is added; other metrics and the ``_created`` series are not
    prices delivered."""
    assert delivered_from_metrics(METRICS) == 1234
    assert delivered_from_metrics("") == 0


def test_direct_rates_are_totals_or_fractions_of_the_sustained_rate() -> None:
    """'0.8x' is 0.8 x the run's sustained rate; with none sustained it is left out."""
    assert direct_rates("12000, 0.8x", 15_000) == [12_000.0, 12_000]
    assert direct_rates("0.8x", None) == []
    assert direct_rates("", 15_000) == []


def test_a_subscriber_that_drains_at_once_kept_pace() -> None:
    """All prices by 0.3 s after the feed's exit, 100 behind at it: kept pace."""
    samples = [(0.0, 0), (5.0, 50_000), (10.0, 99_900), (10.3, 100_000)]
    out = keepup_figures(samples, n=100_000, rate=10_000, feed_end=10.0)
    assert out["behind_at_feed_exit"] == 100
    assert out["drain_after_feed_exit_s"] == 0.3
    assert out["kept_pace"] is True


def test_a_subscriber_far_behind_or_never_complete_did_not_keep_pace() -> None:
    """A second behind at the feed's exit fails; so does never reaching every price."""
    late = [(0.0, 0), (10.0, 90_000), (10.9, 100_000)]
    out = keepup_figures(late, n=100_000, rate=10_000, feed_end=10.0)
    assert out["behind_at_feed_exit_s"] == 1.0
    assert out["kept_pace"] is False
    short = [(0.0, 0), (10.0, 99_999)]
    out = keepup_figures(short, n=100_000, rate=10_000, feed_end=10.0)
    assert out["drain_after_feed_exit_s"] is None
    assert out["kept_pace"] is False


def _summary(**instruments: tuple[int, int, int]) -> dict[str, Any]:
    per = {
        name: {"delivered": d, "first_seq": first, "last_seq": last}
        for name, (d, first, last) in instruments.items()
    }
    return {
        "delivered": sum(d for d, _, _ in instruments.values()),
        "gaps": 0,
        "duplicates": 0,
        "out_of_order": 0,
        "invalid": 0,
        "copies_dropped": 12,
        "instruments": per,
    }


def test_exactly_once_needs_every_seq_of_every_instrument_and_no_defect() -> None:
    """Seqs 1..last for each instrument the feed sent, once, nothing else: ok; a missing
    tail, an extra instrument or a counted duplicate: not ok."""
    expected = {"A": 3, "B": 2}
    assert exactly_once(_summary(A=(3, 1, 3), B=(2, 1, 2)), expected)["ok"] is True
    short = exactly_once(_summary(A=(2, 1, 2), B=(2, 1, 2)), expected)
    assert short["ok"] is False
    assert short["instruments_wrong"] == ["A"]
    extra = exactly_once(_summary(A=(3, 1, 3), B=(2, 1, 2), C=(1, 1, 1)), expected)
    assert extra["instruments_unexpected"] == ["C"]
    assert extra["ok"] is False
    dup = _summary(A=(3, 1, 3), B=(2, 1, 2)) | {"duplicates": 1}
    assert exactly_once(dup, expected)["ok"] is False


async def test_the_count_is_read_from_what_a_real_subscriber_exposes() -> None:
    """A subscriber that delivered 3 prices (a duplicate dropped, a gap) exposes 3."""
    from pricing_ha.config import AppConfig
    from pricing_ha.telemetry import setup_telemetry
    from tests.unit.subscribing.test_subscriber import raw, started

    telemetry = setup_telemetry(AppConfig(), service_role="subscriber", group=None, member="t")
    try:
        sub, fake = await started(telemetry=telemetry)
        fake.batches = [[raw("X", 1), raw("X", 2), raw("X", 2, "p2"), raw("X", 5)]]
        await sub.poll(0.1)
        assert delivered_from_metrics(telemetry.prometheus_text()) == 3
        await sub.close()
    finally:
        telemetry.shutdown()


def test_the_publishers_progress_is_half_the_copies_on_prices_raw() -> None:
    """Two copies per price: 180,000 records at the feed's exit are 90,000 prices published,
    10,000 behind; nothing is counted as ahead."""
    raw = [(0.0, 0), (9.9, 180_000), (10.5, 200_000)]
    assert publishers_behind(raw, n=100_000, feed_end=10.0) == {
        "publishers_behind_at_feed_exit_estimate": 10_000
    }
    assert publishers_behind([(0.0, 210_000)], n=100_000, feed_end=10.0) == {
        "publishers_behind_at_feed_exit_estimate": 0
    }
