"""Which failed partitions start over in place (:mod:`pricing_ha.dedupe.restart`)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pricing_ha.dedupe.restart import Restarts


class _Out:
    def __init__(self, *, fencing: bool) -> None:
        self.fencing = fencing


def _restarts(
    *, fencing: bool, led: set[int], handing_over: set[int]
) -> tuple[Restarts, list[int]]:
    dropped: list[int] = []
    restarts = Restarts(
        cast(Any, None),
        cast(Any, _Out(fencing=fencing)),
        terms={0: 5, 1: 7, 2: 9},
        handing_over=handing_over.__contains__,
        leads=led.__contains__,
        drop=dropped.append,
        resume=lambda partition, high: True,
        may_resume=lambda: True,
    )
    return restarts, dropped


def test_only_partitions_being_handed_over_or_no_longer_led_start_over_in_place() -> None:
    restarts, _ = _restarts(fencing=False, led={0}, handing_over={1})
    # 0: led (taken up again by a takeover); 1: handed over; 2: not led, its hand-over queued;
    # 3: no term of this member's.
    assert restarts.failed({0, 1, 2, 3}) == [0, 3]
    assert 1 in restarts
    assert 2 in restarts
    assert restarts.failed({1}) == []  # already waiting


def test_with_fencing_every_failed_partition_is_dropped() -> None:
    restarts, _ = _restarts(fencing=True, led=set(), handing_over={1})
    assert restarts.failed({1, 2}) == [1, 2]
    assert 1 not in restarts


def test_a_failed_partition_whose_hand_over_never_comes_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr("pricing_ha.dedupe.restart.time.monotonic", lambda: clock[0])
    restarts, dropped = _restarts(fencing=False, led=set(), handing_over=set())
    restarts.failed({2})
    restarts.tend()
    assert dropped == []  # its hand-over may still be a queued command
    clock[0] += 1.5
    restarts.tend()
    assert dropped == [2]
    assert restarts.end(2)  # dropped: it was waiting, so no release is written
    assert 2 not in restarts
