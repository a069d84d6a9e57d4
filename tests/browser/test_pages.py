"""Each HTML page renders in a real browser: headless Chromium loads it, draws its charts.

The pages are made from fixed inputs (the report's rows; a synthetic run's span files), then
loaded from disk: the DOM after loading must hold every chart with its labels, and the
screenshot must be a picture, not a blank or an error page.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PIL import Image

from pricing_ha.local.traces_chart import write_trace_report
from pricing_ha.pipeline.jobs import ReconcileResult
from pricing_ha.pipeline.report import render_html
from tests.browser.chromium import NO_BROWSER_ENV, dump_dom, executable, screenshot
from tests.trace_runs import write_run

pytestmark = [
    pytest.mark.skipif(os.environ.get(NO_BROWSER_ENV) == "1", reason=f"{NO_BROWSER_ENV}=1"),
    pytest.mark.timeout(240),
]


@pytest.fixture(scope="module", autouse=True)
def _chromium() -> None:
    """Chromium is required (scripts/bootstrap installs it): missing, the tests fail."""
    assert executable() is not None, "no chromium on PATH: run scripts/chromium"


def _report_page(path: Path) -> Path:
    """The pipeline report of a small run with one fail-over, a long tail and a defect."""
    t = datetime(2026, 1, 1, 12, tzinfo=UTC)
    leadership = [
        {"group": g, "member": m, "bucket": t + timedelta(seconds=s), "prices": 10}
        for g, m, seconds in (
            ("p1", "a", range(20)),
            ("p1", "b", range(20, 40)),
            ("p2", "c", range(40)),
        )
        for s in seconds
    ]
    page = render_html(
        ReconcileResult(ok=True, expected=1200, offending=[]),
        availability=[
            {"instrument": "AAPL", "longest_silence_s": 0.2},
            {"instrument": "EURUSD", "longest_silence_s": 3.1},
        ],
        failovers=[
            {
                "group": "p1",
                "instrument": "EURUSD",
                "from_member": "a",
                "to_member": "b",
                "seq": 200,
                "at": t + timedelta(seconds=20),
                "handover_s": 3.1,
            }
        ],
        leadership=leadership,
        first_delivery=[{"group": "p1", "first": 700, "share": 0.58}],
        latency_bins=[
            (10 ** (k / 10), 10 ** ((k + 1) / 10), max(1, 500 - 40 * abs(k - 8))) for k in range(36)
        ],
        bars=[],
    )
    path.write_text(page, encoding="utf-8")
    return path


def _leadership_page(tmp_path: Path) -> Path:
    """The leadership timeline of the synthetic run (3 groups' worth of charts)."""
    out = tmp_path / "leadership.html"
    return write_trace_report(write_run(tmp_path / "run"), out, echo=lambda _line: None)


def _assert_a_picture(png: Path) -> None:
    """A screenshot of a page with charts: the full window, many colours, not mostly blank."""
    with Image.open(png) as img:
        assert img.size == (1200, 1600)
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
        ink = sum(n for n, c in colours if c != (255, 255, 255)) / (img.size[0] * img.size[1])
    assert len(colours) > 50, f"{len(colours)} colours: a blank or error page?"
    assert ink > 0.03, f"{ink:.1%} of the page is not white"


def test_report_page_renders_with_its_three_charts(tmp_path: Path) -> None:
    """Chromium's DOM of the report has the verdict and three charts with their axis labels
    and log ticks; the screenshot is a real picture."""
    page = _report_page(tmp_path / "report.html")
    dom = dump_dom(page)
    assert "pricing-ha: availability report" in dom
    assert len(re.findall(r"<svg\b", dom)) == 3
    for text in (
        ">p1 / a</text>",
        ">longest silence on prices (s)</text>",
        ">latency, source time → relay (ms, log scale)</text>",
        ">prices (log scale)</text>",
        ">10 ms</text>",
        ">1000 ms</text>",
    ):
        assert text in dom
    assert "neterror" not in dom
    _assert_a_picture(screenshot(page, tmp_path / "report.png"))


def test_leadership_page_renders_a_chart_per_group(tmp_path: Path) -> None:
    """Chromium's DOM of the timeline has a chart per group and the switch chart, with their
    rows and time axis; the screenshot is a real picture."""
    page = _leadership_page(tmp_path)
    dom = dump_dom(page)
    assert len(re.findall(r"<svg\b", dom)) == 3  # P1, the relay's group, the switches
    assert 'data-group="pricing.p1"' in dom
    assert dom.count(">partition 0</text>") == 2
    assert ">t (s, on the run's clock)</text>" in dom
    assert "neterror" not in dom
    _assert_a_picture(screenshot(page, tmp_path / "leadership.png"))
