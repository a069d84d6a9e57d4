"""The pipeline report's charts: matplotlib SVG with labelled axes, log-scaled latency, tooltips."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta

from pricing_ha.pipeline.report_charts import latency_svg, silences_svg, timeline_svg

T = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _tick_x(svg: str, label: str) -> float:
    """The x of the tick label ``label`` in matplotlib's SVG (text kept as text)."""
    (x,) = re.findall(rf'x="([\d.]+)" y="[\d.]+"[^>]*>{re.escape(label)}</text>', svg)
    return float(x)


def _no_urls(svg: str) -> list[str]:
    """URLs in ``svg`` other than the SVG and XLink namespace names."""
    found = re.findall(r"https?://[^\"' <]+", svg)
    return [
        u for u in found if u not in {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    ]


def test_latency_distribution_is_log_scaled_with_labelled_axes() -> None:
    """Decades of latency are evenly spaced (a log axis), both axes are labelled, counts too."""
    bins = [
        (10 ** (i / 10), 10 ** ((i + 1) / 10), 1000 // (1 + abs(i - 5))) for i in range(-20, 35)
    ]
    svg = latency_svg(bins)
    assert svg.startswith("<svg")
    assert "<!DOCTYPE" not in svg
    assert "<?xml" not in svg
    assert ">latency, source time → relay (ms, log scale)</text>" in svg
    assert ">prices (log scale)</text>" in svg
    xs = [_tick_x(svg, f"{v:g} ms") for v in (0.01, 0.1, 1, 10, 100, 1000)]
    steps = [b - a for a, b in itertools.pairwise(xs)]
    assert min(steps) > 50
    assert max(steps) - min(steps) < 0.5  # equal per decade: log, not linear
    assert ">100</text>" in svg  # the counts, in powers of ten too
    titles = re.findall(r"<title>([^<]+)</title>", svg)
    assert "≤ 0.0126 ms: 38 prices" in titles  # the floor bin says it holds everything below
    assert _no_urls(svg) == []


def test_latency_of_nothing_says_so_instead_of_an_empty_chart() -> None:
    """No latency at all (no relay_ns header) gives a note, not an empty plot."""
    assert "no latencies" in latency_svg([(1.0, 1.26, 0)])


def test_leadership_timeline_has_a_lane_per_member_and_fail_over_tooltips() -> None:
    """Each (group, member) is a labelled lane with its total; a fail-over tick says what moved."""
    leadership = (
        [
            {"group": "p1", "member": "a", "bucket": T + timedelta(seconds=s), "prices": 10}
            for s in range(5)
        ]
        + [
            {"group": "p1", "member": "b", "bucket": T + timedelta(seconds=s), "prices": 7}
            for s in range(5, 9)
        ]
        + [
            {"group": "p2", "member": "c", "bucket": T + timedelta(seconds=s), "prices": 3}
            for s in range(9)
        ]
    )
    failovers = [
        {
            "group": "p1",
            "instrument": "EUR<USD>",
            "from_member": "a",
            "to_member": "b",
            "at": T + timedelta(seconds=5.2),
            "handover_s": 1.25,
        }
    ]
    svg = timeline_svg(leadership, failovers)
    for lane in ("p1 / a", "p1 / b", "p2 / c"):
        assert f">{lane}</text>" in svg
    assert ">time since 12:00:00 (s)</text>" in svg
    lanes = re.findall(
        r'class="lane" data-group="([^"]+)" data-member="([^"]+)">\s*<title>([^<]+)<', svg
    )
    assert lanes == [
        ("p1", "a", "p1 / a: 50 prices in 5 s"),
        ("p1", "b", "p1 / b: 28 prices in 4 s"),
        ("p2", "c", "p2 / c: 27 prices in 9 s"),
    ]
    (tick,) = re.findall(r'class="failover" data-instrument="([^"]+)">\s*<title>([^<]+)<', svg)
    assert tick == ("EUR&lt;USD&gt;", "EUR&lt;USD&gt;: a → b, hand-over 1.250 s")
    assert _no_urls(svg) == []


def test_longest_silences_are_labelled_bars() -> None:
    """Each instrument has a bar labelled with its longest silence, on a labelled axis."""
    svg = silences_svg([("AAPL", 0.25), ("EURUSD", 3.5)])
    assert ">AAPL</text>" in svg
    assert ">EURUSD</text>" in svg
    assert ">0.250 s</text>" in svg
    assert ">3.500 s</text>" in svg
    assert ">longest silence on prices (s)</text>" in svg
