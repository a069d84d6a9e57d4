"""Unit tests drive workers batch by batch, each batch's commit checked as it is made: the
worker's commit interval (``pricing_ha.member.commits.COMMIT_EVERY_S``) is 0 for them, except
in tests marked ``commit_interval``, which test the interval itself."""

from __future__ import annotations

import pytest

from pricing_ha.member import commits


@pytest.fixture(autouse=True)
def _commit_every_batch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("commit_interval") is None:
        monkeypatch.setattr(commits, "COMMIT_EVERY_S", 0.0)
