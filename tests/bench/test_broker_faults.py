"""The broker-fault benchmark (bench.broker.faults): the silence it measures on arrivals, and its
goals block."""

from __future__ import annotations

from typing import Any

import pytest

from bench.broker.fault_rounds import longest_silence
from bench.broker.faults import goals

_OK = {"ok": True, "missing": 0, "duplicates": 0, "out_of_order": 0}


def test_longest_silence_is_the_widest_wait_overlapping_the_window() -> None:
    """Waits that end in the window or span it count, one still open is counted to its end,
    and one that ended before the window does not."""
    arrivals = {"x": [0.0, 0.1, 0.2, 1.5, 1.6], "y": [0.0, 0.1, 0.9], "z": [5.0]}
    assert longest_silence(arrivals, 0.15, 1.55) == (1.3, "x", False)
    assert longest_silence(arrivals, 0.15, 3.0) == (2.1, "y", True)  # y never came back
    assert longest_silence(arrivals, 1.6, 1.7) == (0.8, "y", True)  # x's 1.3 ended at 1.5
    assert longest_silence({"x": [0.0, 0.1]}, 0.5, 0.6) == (0.5, "x", True)
    assert longest_silence({"z": [5.0]}, 0.0, 1.0) == (0.0, None, False)


def _rounds(fault: str, *pairs: tuple[float, float], zombies: int = 0) -> dict[str, Any]:
    rows = [
        {
            "silence_s": s,
            "probe_silence_s": p,
            **({"zombie_records": zombies} if fault == "az-a" else {}),
        }
        for s, p in pairs
    ]
    return {"rounds": rows, "exactly_once": dict(_OK)}


def test_goals_hold_prices_against_the_probe_plus_margin_and_each_fault_its_own_bound() -> None:
    """kill/stop: p99 <= probe p99 + 0.5 s; rolling: max <= the demo's bound; AZ a: the relay
    crash goal + the probe, no zombies; exactly once everywhere."""
    by_fault = {
        "kill-leader": _rounds("kill-leader", (3.4, 3.0), (3.2, 3.1)),
        "sigstop": _rounds("sigstop", (3.7, 3.0)),
        "rolling": _rounds("rolling", (0.6, 0.4), (0.69, 0.5)),
        "az-a": _rounds("az-a", (3.5, 3.0)),
    }
    met = goals(by_fault, bound_s=0.7)
    assert met["kill-leader"]["met"] is True
    assert met["kill-leader"]["bound_s"] == pytest.approx(3.6)
    assert met["sigstop"]["met"] is False  # 3.7 > 3.0 + 0.5
    assert met["rolling"]["met"] is True
    assert met["rolling"]["measured_s"] == pytest.approx(0.69)
    assert met["az-a"]["met"] is True
    assert met["exactly_once"]["met"] is True
    assert met["all_met"] is False


def test_goals_fail_on_a_zombie_a_lost_price_or_nothing_measured() -> None:
    """A zombie record, a lost price, or a fault with no round is never met."""
    lost = _rounds("kill-leader", (1.0, 1.0))
    lost["exactly_once"] = {**_OK, "ok": False, "missing": 3}
    met = goals(
        {
            "az-a": _rounds("az-a", (0.5, 3.0), zombies=2),
            "kill-leader": lost,
            "kill-coordinator": {"rounds": [], "exactly_once": dict(_OK)},
        },
        bound_s=0.7,
    )
    assert met["az-a"]["met"] is False
    assert met["az-a"]["zombie_records"] == 2
    assert met["exactly_once"]["met"] is False
    assert met["exactly_once"]["missing"] == 3
    assert met["kill-coordinator"]["met"] is False


def test_a_fault_whose_rounds_did_not_finish_is_not_met() -> None:
    """A round that raised (a broker that never came back) fails its goal, whatever the
    rounds before it measured."""
    broken = {**_rounds("kill-leader", (0.1, 1.0)), "error": "LocalKafkaError: node 2"}
    met = goals({"kill-leader": broken}, bound_s=0.7)
    assert met["kill-leader"]["met"] is False
    assert met["kill-leader"]["error"] == "LocalKafkaError: node 2"
