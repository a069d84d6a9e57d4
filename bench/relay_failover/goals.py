"""The goals of the relay takeover benchmark, held against what it measured (the JSON's ``goals``).

Each goal gets its bound, the measured figure, how many events it rests on, and whether it
was met (False when nothing was measured: a goal is not met by default). Whether the run
itself was the one the goals describe (10 rounds per retained value, ~0 and ~1M records
retained, S = 6,000 ms, 1,000 prices/s, a 10-minute quiet window) is said once, in
``as_specified``, with what differed.
"""

from __future__ import annotations

from typing import Any

from bench.relay_failover.rounds import FAULTS, pct

KILL_P99_S = 0.6  # relay owner SIGKILL: silence on prices at p99
STOP_P99_S = 0.6  # relay owner SIGSTOP past the detector's threshold: the same bound
PLANNED_MAX_TICKS = 2.0  # planned hand-over (SIGTERM) and join, at the maximum
ROUNDS = 10
RETAINED = (0, 1_000_000)
SESSION_MS = 6000  # the relay group's session timeout: MSK's default minimum
PRICES_PER_S = 1000.0
QUIET_S = 600.0


def p99(values: list[float]) -> float | None:
    """The 99th percentile (nearest rank, as :func:`bench.relay_failover.rounds.pct`) of ``values``
    (None: there are none)."""
    return pct(values).get("p99")


def worst_per_event(
    events: list[dict[str, Any]], fault: str, key: str = "silence_s"
) -> list[float]:
    """Per event of ``fault``: its worst partition's ``key`` (events without one left out)."""
    return [max(e[key].values()) for e in events if e["fault"] == fault and e.get(key)]


def _goal(text: str, bound: float, measured: float | None, n: int, **extra: Any) -> dict[str, Any]:
    met = measured is not None and n > 0 and measured <= bound
    return {"goal": text, "bound": bound, "measured": measured, "n": n, "met": met, **extra}


def _ticks(seconds: float | None, tick_s: float) -> float | None:
    return None if seconds is None else round(seconds / tick_s, 2)


def goals(
    events: list[dict[str, Any]],
    quiet: list[dict[str, Any]],
    verdicts: list[dict[str, Any] | None],
    *,
    tick_s: float,
) -> dict[str, dict[str, Any]]:
    """Each goal against the measured figures.

    Args:
        events: every fault event of the run (all retained values): ``fault``, per partition
            ``silence_s``, and for ``sigstop`` ``silence_until_settled_s`` (what its goal
            holds) and ``zombie_records``.
        quiet: each quiet window's result (``window_s``, ``wrong_suspicions``).
        verdicts: each cluster's exactly-once verdict (None: not judged).
        tick_s: the feed's tick per instrument.
    """
    kill = worst_per_event(events, "kill")
    # from the SIGSTOP until settled after the SIGCONT: the stopped relay's return counts too
    stop = worst_per_event(events, "sigstop", "silence_until_settled_s")
    zombies = [e["zombie_records"] for e in events if e["fault"] == "sigstop"]
    stop_p99 = p99(stop)
    planned = {f: worst_per_event(events, f) for f in ("sigterm", "join")}
    wrong = sum(q["wrong_suspicions"] for q in quiet)
    window_s = round(sum(q["window_s"] for q in quiet), 1)
    judged = [v for v in verdicts if v is not None]
    # against the feed's count (the verdict), and from the topic alone
    totals = {k: sum(v[k] for v in judged) for k in ("duplicates", "out_of_order", "missing")}
    topic = {k: sum(v["topic"][k] for v in judged) for k in ("duplicates", "out_of_order", "gaps")}
    return {
        "kill": _goal(
            "relay owner SIGKILL: silence on prices at p99 (worst partition per event), s",
            KILL_P99_S,
            p99(kill),
            len(kill),
        ),
        "sigstop": {
            **_goal(
                "relay owner SIGSTOP past the detector's threshold, then SIGCONT: silence from "
                "the SIGSTOP until settled after the SIGCONT, at p99 (worst partition per "
                "event), s, and no record of the stopped relay visible after its successor's "
                "first",
                STOP_P99_S,
                stop_p99,
                len(stop),
                zombie_records=sum(zombies) if zombies else None,
                until_first_successor_record_p99_s=p99(worst_per_event(events, "sigstop")),
            ),
            "met": stop_p99 is not None and stop_p99 <= STOP_P99_S and sum(zombies) == 0,
        },
        **{
            fault: _goal(
                f"{what}: silence on prices at the maximum, in feed ticks",
                PLANNED_MAX_TICKS,
                _ticks(max(values, default=None), tick_s),
                len(values),
                measured_s=max(values, default=None),
            )
            for fault, what, values in (
                ("sigterm", "planned hand-over (SIGTERM of the owner)", planned["sigterm"]),
                ("join", "a relay joining (from its start until settled)", planned["join"]),
            )
        },
        "wrong_suspicions": {
            **_goal(
                "takeovers in a fault-free window at 1,000 prices/s",
                0,
                wrong if quiet else None,
                len(quiet),
            ),
            "window_s": window_s,
        },
        "exactly_once": {
            "goal": "every cluster exactly once and in order on prices (read_committed)",
            "clusters": len(verdicts),
            "judged": len(judged),
            **totals,
            "counted_from_the_topic": topic,
            "met": bool(verdicts) and len(judged) == len(verdicts) and all(v["ok"] for v in judged),
        },
    }


def as_specified(
    *,
    rounds: int,
    retained: list[int],
    session_ms: int,
    prices_per_s: float,
    quiet_s: float,
    faults: tuple[str, ...] = FAULTS,
) -> dict[str, Any]:
    """Whether the run was the one the goals describe, and what differed."""
    differs = []
    if faults != FAULTS:
        differs.append(f"faults per round {list(faults)} (goals: {list(FAULTS)})")
    if rounds < ROUNDS:
        differs.append(f"{rounds} rounds per retained value (goals: {ROUNDS})")
    if sorted(retained) != sorted(RETAINED):
        differs.append(f"retained {retained} (goals: {list(RETAINED)})")
    if session_ms != SESSION_MS:
        differs.append(f"relay session timeout {session_ms} ms (goals: {SESSION_MS})")
    if prices_per_s != PRICES_PER_S:
        differs.append(f"{prices_per_s:g} prices/s (goals: {PRICES_PER_S:g})")
    if quiet_s < QUIET_S:
        differs.append(f"quiet window {quiet_s:g} s (goals: {QUIET_S:g})")
    return {"ok": not differs, "differs": differs}
