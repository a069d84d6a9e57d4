"""The report page: plain Python, no SparkSession needed."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from pricing_ha.pipeline.jobs import ReconcileResult
from pricing_ha.pipeline.report import render_html

pytestmark = pytest.mark.spark


def test_report_of_a_failed_verdict_names_the_offending_rows_and_escapes_text() -> None:
    """The verdict line says FAILED, each offending row is in the page, text is escaped, and
    the charts are inline SVG with no remote assets."""
    verdict = ReconcileResult(
        ok=False,
        expected=10,
        offending=[
            {"instrument": "EUR<USD>", "seq": 3, "status": "missing", "copies": 0, "at": []},
            {
                "instrument": "GBPUSD",
                "seq": 7,
                "status": "duplicated",
                "copies": 2,
                "at": ["1:4", "1:9"],
            },
        ],
    )
    t = datetime(2026, 1, 1, tzinfo=UTC)
    page = render_html(
        verdict,
        availability=[{"instrument": "GBPUSD", "longest_silence_s": 1.5}],
        failovers=[
            {
                "group": "p1",
                "instrument": "GBPUSD",
                "from_member": "a",
                "to_member": "b",
                "seq": 5,
                "at": t,
                "handover_s": 3.2,
            }
        ],
        leadership=[
            {"group": "p1", "member": "a", "bucket": t, "prices": 10},
            {"group": "p1", "member": "b", "bucket": t, "prices": 4},
        ],
        first_delivery=[{"group": "p1", "first": 10, "share": 1.0}],
        latency_bins=[(1.0, 1.26, 3), (1.26, 1.58, 0), (1.58, 2.0, 1)],
        bars=[],
    )
    assert "RECONCILE FAILED: 2 offending rows" in page
    assert "EUR&lt;USD&gt;" in page
    assert "EUR<USD>" not in page
    assert "1:4, 1:9" in page
    assert page.count("<svg") == 3
    assert ">latency, source time → relay (ms, log scale)</text>" in page
    assert (
        re.findall(r"https?://[^\"' <]+", page)
        == [
            "http://www.w3.org/2000/svg",
            "http://www.w3.org/1999/xlink",
        ]
        * 3
    )  # namespace names only: nothing is fetched
