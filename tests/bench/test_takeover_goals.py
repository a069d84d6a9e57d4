"""The goals block of bench.relay_failover.takeover: each goal's figure, and met only when measured
within."""

from __future__ import annotations

from typing import Any

from bench.relay_failover.goals import as_specified, goals

_CLEAN = {"duplicates": 0, "out_of_order": 0, "gaps": 0}


def _verdict(ok: bool = True, duplicates: int = 0) -> dict[str, Any]:
    topic = {**_CLEAN, "duplicates": duplicates}
    return {"ok": ok, "duplicates": duplicates, "out_of_order": 0, "missing": 0, "topic": topic}


def _event(fault: str, *silences: float, zombies: int = 0) -> dict[str, Any]:
    row: dict[str, Any] = {"fault": fault, "silence_s": dict(enumerate(silences))}
    if fault == "sigstop":
        row["silence_until_settled_s"] = row["silence_s"]
        row["zombie_records"] = zombies
    return row


def _all_met() -> list[dict[str, Any]]:
    return [
        _event("kill", 0.3, 0.5),
        _event("sigstop", 0.4),
        _event("sigterm", 0.15),
        _event("join", 0.12, 0.2),
    ]


def test_every_goal_is_met_by_figures_within_its_bound() -> None:
    """Worst partitions within the bounds, no zombie, no takeover, clean verdicts: all met."""
    got = goals(_all_met(), [{"window_s": 600.0, "wrong_suspicions": 0}], [_verdict()], tick_s=0.1)
    assert {k: g["met"] for k, g in got.items()} == dict.fromkeys(got, True)
    assert got["kill"]["measured"] == 0.5  # the event's worst partition
    assert got["join"]["measured"] == 2.0  # 0.2 s in ticks of 0.1 s
    assert got["join"]["measured_s"] == 0.2


def test_a_kill_silence_over_the_bound_misses_the_goal() -> None:
    """One event's worst partition at 3.5 s makes the p99 of two events 3.5 s: missed."""
    events = [*_all_met(), _event("kill", 3.5)]
    got = goals(events, [], [_verdict()], tick_s=0.1)
    assert got["kill"]["measured"] == 3.5
    assert got["kill"]["met"] is False


def test_a_single_zombie_record_misses_the_sigstop_goal_however_short_the_silence() -> None:
    """A stopped relay's late record visible on prices fails the goal even at 0.1 s."""
    events = [_event("sigstop", 0.1, zombies=1)]
    got = goals(events, [], [_verdict()], tick_s=0.1)
    assert got["sigstop"]["zombie_records"] == 1
    assert got["sigstop"]["met"] is False


def test_a_planned_move_of_three_ticks_misses_the_two_tick_goal() -> None:
    """A SIGTERM hand-over silent for 0.3 s at 10 Hz is 3 ticks: missed."""
    got = goals([_event("sigterm", 0.3)], [], [_verdict()], tick_s=0.1)
    assert got["sigterm"]["measured"] == 3.0
    assert got["sigterm"]["met"] is False


def test_a_takeover_in_the_quiet_window_is_a_wrong_suspicion() -> None:
    """Any takeover in a fault-free window misses the goal of none."""
    quiet = [{"window_s": 300.0, "wrong_suspicions": 0}, {"window_s": 300.0, "wrong_suspicions": 1}]
    got = goals(_all_met(), quiet, [_verdict()], tick_s=0.1)
    assert got["wrong_suspicions"]["measured"] == 1
    assert got["wrong_suspicions"]["window_s"] == 600.0
    assert got["wrong_suspicions"]["met"] is False


def test_the_sigstop_goal_holds_the_silence_until_settled_after_the_sigcont() -> None:
    """A quick successor (0.4 s) does not meet the goal if the stopped relay's return then
    silences a partition for 1.2 s."""
    event = {
        "fault": "sigstop",
        "silence_s": {0: 0.4},
        "silence_until_settled_s": {0: 1.2},
        "zombie_records": 0,
    }
    got = goals([event], [], [_verdict()], tick_s=0.1)["sigstop"]
    assert (got["measured"], got["until_first_successor_record_p99_s"]) == (1.2, 0.4)
    assert got["met"] is False


def test_a_goal_with_nothing_measured_is_not_met() -> None:
    """No sigstop event and no quiet window: those goals are not met by default."""
    got = goals([_event("kill", 0.1)], [], [_verdict()], tick_s=0.1)
    assert got["sigstop"]["measured"] is None
    assert got["sigstop"]["met"] is False
    assert got["wrong_suspicions"]["met"] is False


def test_exactly_once_fails_with_one_bad_or_unjudged_cluster() -> None:
    """A duplicate in one cluster, or a cluster never judged, fails exactly once."""
    bad = goals(_all_met(), [], [_verdict(), _verdict(ok=False, duplicates=2)], tick_s=0.1)
    assert bad["exactly_once"]["duplicates"] == 2
    assert bad["exactly_once"]["counted_from_the_topic"]["duplicates"] == 2
    assert bad["exactly_once"]["met"] is False
    assert goals(_all_met(), [], [_verdict(), None], tick_s=0.1)["exactly_once"]["met"] is False


def test_as_specified_names_what_differs_from_the_goals_setup() -> None:
    """A short run says how it differs; the goals' own setup differs in nothing."""
    full = as_specified(
        rounds=10, retained=[0, 1_000_000], session_ms=6000, prices_per_s=1000, quiet_s=600
    )
    assert full == {"ok": True, "differs": []}
    short = as_specified(rounds=2, retained=[0], session_ms=6000, prices_per_s=1000, quiet_s=0)
    assert short["ok"] is False
    assert len(short["differs"]) == 3


def test_a_run_of_some_faults_only_is_not_the_specified_run() -> None:
    """A smoke run of planned moves alone (``--faults sigterm,join``) says so."""
    spec = as_specified(
        rounds=10,
        retained=[0, 1000000],
        session_ms=6000,
        prices_per_s=1000.0,
        quiet_s=600.0,
        faults=("sigterm", "join"),
    )
    assert not spec["ok"]
    assert spec["differs"] == [
        "faults per round ['sigterm', 'join'] (goals: "
        "['kill', 'join', 'sigstop', 'sigterm', 'join'])"
    ]
