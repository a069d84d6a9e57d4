"""The direct-subscriber keep-up check on a real broker, with the whole product path running."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.price_path.direct_keepup import direct_case

pytestmark = pytest.mark.integration


def test_a_direct_subscriber_is_judged_from_its_own_metrics_and_summary(
    bootstrap: str, tmp_path: Path
) -> None:
    """At a low rate the direct subscriber gets every price exactly once; its progress, drain
    and CPU per price are measured (not left empty)."""
    case = direct_case(
        bootstrap, None, tmp_path, rate=400.0, step_s=3.0, instruments=20, partitions=2
    )
    assert case["exactly_once"]["ok"], case["exactly_once"]
    assert case["exactly_once"]["delivered"] == 1_200
    # Both groups' copies reached the subscriber, which dropped the second of each.
    assert case["exactly_once"]["copies_dropped"] > 0
    assert case["drain_after_feed_exit_s"] is not None
    assert case["behind_at_feed_exit"] >= 0
    assert case["publishers_behind_at_feed_exit_estimate"] <= case["prices"]
    assert case["subscriber_cpu"]["cpu_us_per_price"] is not None
    assert case["topics_deleted"]
