"""Which failed partitions start over in place (:mod:`pricing_ha.dedupe.restart`)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pricing_ha.dedupe.restart import Restarts


class _Out:
    def __init__(self, *, fencing: bool) -> None:
        self.fencing = fencing
        self.markers: list[int] = []

    def write_markers(self, partitions: list[int], *_: Any, **__: Any) -> dict[int, int]:
        self.markers += partitions
        return {}  # not acknowledged: the start over is tried again later


def _restarts(
    *,
    fencing: bool,
    led: set[int],
    handing_over: set[int],
    answers: list[bool] | None = None,
) -> tuple[Restarts, list[int]]:
    dropped: list[int] = []
    answered = [True] if answers is None else answers
    restarts = Restarts(
        cast(Any, None),
        cast(Any, _Out(fencing=fencing)),
        terms={0: 5, 1: 7, 2: 9},
        handing_over=handing_over.__contains__,
        leads=led.__contains__,
        drop=dropped.append,
        resume=lambda partition, high, since: True,
        may_resume=lambda: answered[0],
    )
    return restarts, dropped


def test_only_partitions_without_a_term_are_dropped_at_once() -> None:
    restarts, _ = _restarts(fencing=False, led={0}, handing_over={1})
    # 0: led (taken up afresh once the broker answers); 1: handed over; 2: not led, its
    # hand-over queued; 3: no term of this member's.
    assert restarts.failed({0, 1, 2, 3}) == [3]
    assert 0 in restarts
    assert 1 in restarts
    assert 2 in restarts
    assert restarts.failed({1}) == []  # already waiting


def test_a_led_partition_is_taken_up_afresh_only_once_the_broker_answers() -> None:
    answers = [False]
    restarts, dropped = _restarts(fencing=False, led={0}, handing_over=set(), answers=answers)
    restarts.failed({0})
    restarts.tend()
    assert dropped == []  # the broker has not answered: a fence may still come first
    answers[0] = True
    restarts.tend()
    assert dropped == [0]
    assert 0 not in restarts  # dropped as before: its release is written as before


def test_a_led_partition_fenced_before_the_broker_answers_is_handed_over_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fault drill's order: output timed out by a broker stall, then (21 ms later) the
    member's own heartbeat late. Dropped at once, the partition was silent until the
    re-formed group's owner waited out a grace period; kept, it is handed over and started
    over in place once the broker answers."""
    clock = [100.0]
    monkeypatch.setattr("pricing_ha.dedupe.restart.time.monotonic", lambda: clock[0])
    led, handing_over, answers = {0}, set[int](), [False]
    restarts, dropped = _restarts(
        fencing=False, led=led, handing_over=handing_over, answers=answers
    )
    restarts.failed({0})
    led.clear()  # FENCED
    clock[0] += 0.9
    restarts.tend()
    assert dropped == []  # its hand-over is a command not applied yet
    clock[0] += 0.5  # 1.4 s after the failure, 0.5 s after the fence was seen
    handing_over.add(0)
    answers[0] = True
    restarts.tend()
    assert dropped == []
    assert 0 in restarts  # started over in place (tried: the marker is not acknowledged here)
    out = cast(Any, restarts)._control
    assert out.markers == [0]


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
