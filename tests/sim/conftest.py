"""The simulations run with coverage paused.

They execute the same library code millions of times: traced with branch coverage they took
about five times as long (the relay scenario of the group simulation 45 s instead of 9 s), some
15 of the default test run's 33 minutes on a 2-core machine. What they check does not depend on
tracing, and the unit and integration tests measure coverage. ``PRICING_HA_SIM_COVERAGE=1``
traces them too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import coverage
import pytest


@pytest.fixture(autouse=True)
def _coverage_paused() -> Iterator[None]:
    cov = coverage.Coverage.current()
    if cov is None or os.environ.get("PRICING_HA_SIM_COVERAGE") == "1":
        yield
        return
    cov.stop()
    try:
        yield
    finally:
        cov.start()
