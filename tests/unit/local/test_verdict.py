"""The demo's verdict: OK, DEGRADED or FAILED from crafted records, bounds, causes, exit codes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pricing_ha.cli import app
from pricing_ha.local.cluster import Record
from pricing_ha.local.judging import judge
from pricing_ha.local.verdict import Fault, SilenceBound, State
from pricing_ha.publishing.pricing import Price, encode_price

T0 = 1_700_000_000.0  # the run's t=0, wall seconds
BOUND = SilenceBound(tick_s=0.1, reorder_window_s=0.5)  # 0.7 s


def _value(seq: int) -> bytes:
    """A price value's seq (all the verdict reads of it: never the ``seq`` header)."""
    return b'{"seq":%d}' % seq


def _prices(instrument: str, times: list[float], seqs: list[int] | None = None) -> list[Record]:
    """Records of one instrument on partition 0, one per ``times`` (run clock, seconds)."""
    seqs = seqs if seqs is not None else list(range(1, len(times) + 1))
    return [
        Record(0, i, instrument.encode(), _value(s), {"seq": str(s)}, int((T0 + t) * 1000))
        for i, (t, s) in enumerate(zip(times, seqs, strict=True))
    ]


def _ticks(start: float, n: int) -> list[float]:
    return [round(start + 0.1 * i, 3) for i in range(n)]


def test_bound_is_derived_from_the_tick_and_the_reorder_window() -> None:
    """2 ticks + the reorder window, unless given; the description says which."""
    assert BOUND.bound_s == pytest.approx(0.7)
    assert "2 ticks of 100 ms" in BOUND.describe()
    given = SilenceBound(tick_s=0.1, reorder_window_s=0.5, override_s=3.0)
    assert given.bound_s == 3.0
    assert "--silence-bound" in given.describe()
    with pytest.raises(ValueError, match="positive"):
        SilenceBound(tick_s=0.1, reorder_window_s=0.5, override_s=0)


def test_exactly_once_in_order_within_the_bound_is_ok() -> None:
    """Every seq once, in order, no wait over the bound: OK, exit 0."""
    v = judge({"EURUSD": 20}, _prices("EURUSD", _ticks(1.0, 20)), bound=BOUND, origin_wall_s=T0)
    assert v.state is State.OK
    assert State.OK.exit_code == 0
    assert v.breaches == []
    assert v.headline().startswith("VERDICT: OK")


def test_a_silence_over_the_bound_is_degraded_and_names_the_fault() -> None:
    """A 5 s hole right after a relay kill: DEGRADED, exit 5, the kill named as the cause."""
    times = _ticks(1.0, 10) + _ticks(7.0, 10)  # last price at t=1.9, next at t=7.0
    faults = [
        Fault(0.5, "SIGKILL p1-a"),
        Fault(2.0, "SIGKILL relay-r1"),
        Fault(10.0, "SIGSTOP p1-b", until_s=12.0),
    ]
    v = judge(
        {"EURUSD": 20},
        _prices("EURUSD", times),
        bound=BOUND,
        origin_wall_s=T0,
        faults=faults,
        horizon_s=12.0,
    )
    assert v.state is State.DEGRADED
    assert v.state.exit_code == 5
    (breach,) = v.breaches
    assert (breach.instrument, breach.partition) == ("EURUSD", 0)
    assert breach.start_s == pytest.approx(1.9)
    assert breach.end_s == pytest.approx(7.0)
    assert "SIGKILL relay-r1" in breach.cause
    assert "after the last price" in breach.cause
    assert "VERDICT: DEGRADED" in v.headline()
    assert "1 of 1 instrument(s)" in v.headline()
    assert "SIGKILL relay-r1" in v.render_breaches()


def test_a_silence_during_a_lasting_fault_is_attributed_to_it() -> None:
    """A silence that begins while a pause is active names the pause, with its interval."""
    times = _ticks(1.0, 10) + _ticks(4.0, 10)
    faults = [Fault(0.2, "AZ b lost", until_s=1.5), Fault(1.0, "SIGSTOP p1-b", until_s=3.0)]
    v = judge(
        {"X": 20}, _prices("X", times), bound=BOUND, origin_wall_s=T0, faults=faults, horizon_s=1
    )
    (breach,) = v.breaches
    assert breach.cause.startswith("during SIGSTOP p1-b (t=1.0-3.0 s)")


def test_a_silence_with_no_fault_near_it_is_unexplained() -> None:
    """No fault within the horizon: the cause says so instead of guessing."""
    times = _ticks(20.0, 10) + _ticks(24.0, 10)
    v = judge(
        {"X": 20},
        _prices("X", times),
        bound=BOUND,
        origin_wall_s=T0,
        faults=[Fault(1.0, "SIGKILL p1-a")],
        horizon_s=5.0,
    )
    assert v.state is State.DEGRADED
    assert "unexplained" in v.breaches[0].cause


@pytest.mark.parametrize(
    ("seqs", "what"),
    [
        ([1, 2, 3, 5], "missing"),
        ([1, 2, 2, 3, 4], "duplicates"),
        ([1, 3, 2, 4], "out_of_order"),
    ],
)
def test_loss_duplicate_or_disorder_is_failed_even_with_a_breach(
    seqs: list[int], what: str
) -> None:
    """FAILED outranks DEGRADED: exit 1."""
    times = [1.0 + 0.1 * i for i in range(len(seqs))]
    times[-1] += 5.0  # a breach too
    v = judge({"X": 4}, _prices("X", times, seqs), bound=BOUND, origin_wall_s=T0)
    (row,) = v.instruments
    assert getattr(row, what) > 0
    assert v.state is State.FAILED
    assert v.state.exit_code == 1
    assert v.headline().startswith("VERDICT: FAILED")


def test_a_subscriber_defect_fails_a_clean_run() -> None:
    """The independent subscriber's own verdict counts."""
    v = judge({"X": 5}, _prices("X", _ticks(1, 5)), bound=BOUND, subscriber_ok=False)
    assert v.state is State.FAILED
    assert "subscriber" in v.headline()


def test_raw_silences_count_first_copies_only() -> None:
    """On prices.raw the second group's copy of a seq does not end a silence."""
    a = _prices("X", _ticks(1.0, 10))
    b = [  # the other group's copies of seqs 1..10, late, then seqs 11..20 after a hole
        Record(0, 100 + i, b"X", _value(i + 1), {"seq": "1"}, int((T0 + 3.0 + 0.01 * i) * 1000))
        for i in range(10)
    ]
    later = _prices("X", _ticks(5.0, 10), list(range(11, 21)))
    raw = (
        a
        + b
        + [Record(0, 200 + r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in later]
    )
    v = judge({"X": 20}, _prices("X", _ticks(1.0, 20)), raw=raw, bound=BOUND, origin_wall_s=T0)
    assert v.state is State.OK  # prices itself was fine
    (breach,) = v.raw_breaches
    assert breach.topic == "prices.raw"
    assert breach.start_s == pytest.approx(1.9)
    assert breach.end_s == pytest.approx(5.0)
    assert v.instruments[0].raw_longest_silence_s == pytest.approx(3.1)


def test_demo_help_documents_the_exit_statuses() -> None:
    """`pricing-ha demo --help` names the three states and their exit statuses."""
    result = CliRunner().invoke(app, ["demo", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for expected in ("0 OK", "5 DEGRADED", "1 FAILED", "--silence-bound"):
        assert expected in text


def test_a_restarted_feed_is_judged_by_epoch_then_seq() -> None:
    """Seqs 1..3 of epoch 100, then 1..2 of epoch 200: no duplicate, none out of order."""

    def rec(offset: int, epoch: int, seq: int) -> Record:
        p = Price(
            instrument="A", seq=seq, bid=1.0, ask=1.1, mid=1.05, source_time_ns=1, epoch=epoch
        )
        at_ms = int(1000 * (T0 + offset))
        return Record(0, offset, b"A", encode_price(p), {"seq": str(seq)}, at_ms)

    records = [rec(0, 100, 1), rec(1, 100, 2), rec(2, 100, 3), rec(3, 200, 1), rec(4, 200, 2)]
    (line,) = judge({"A": 2}, records).instruments
    assert (line.duplicates, line.out_of_order, line.missing) == (0, 0, 0)


def test_a_fault_striking_during_a_silence_is_named_beside_its_cause() -> None:
    """A silence begun by a publisher's pause and prolonged by the loss of AZ a names the
    pause as the cause and the AZ outage as a fault that struck during it; a fault after the
    silence is not named."""
    times = _ticks(1.0, 10) + _ticks(9.0, 10)  # last price at t=1.9, next at t=9.0
    faults = [
        Fault(1.5, "SIGSTOP p1-b", until_s=5.5),
        Fault(4.0, "AZ a lost: SIGSTOP broker 1 and p1-c, relay-r1", until_s=8.0),
        Fault(9.5, "SIGKILL broker 2"),
    ]
    v = judge(
        {"EURUSD": 20}, _prices("EURUSD", times), bound=BOUND, origin_wall_s=T0, faults=faults
    )
    (breach,) = v.breaches
    assert breach.fault == faults[0].describe()
    assert f"struck during it: {faults[1].describe()}" in breach.cause
    assert "SIGKILL broker 2" not in breach.cause
