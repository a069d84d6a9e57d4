"""A/B line arbitration (dedupe.arbitration): order, once-only, gaps, switches, restarts."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from typing import TypeVar

import pytest

from pricing_ha.dedupe.arbitration import Arbiter, Emission

W = 0.05  # reorder window (s)
T = TypeVar("T")


def seqs(out: Iterable[Emission[T]]) -> list[int]:
    """The seqs of some emissions, in order."""
    return [e.seq for e in out]


def test_second_copy_of_each_seq_is_dropped_and_counted() -> None:
    """Both groups' copies of 1..5: each seq is emitted once, the other copy counted."""
    arb: Arbiter[str] = Arbiter(W)
    out: list[Emission[str]] = []
    for s in range(1, 6):
        out += arb.offer("EURUSD", s, f"a{s}", "p1/a", 1.0)
        out += arb.offer("EURUSD", s, f"b{s}", "p2/a", 1.0)
    assert seqs(out) == [1, 2, 3, 4, 5]
    assert [e.item for e in out] == ["a1", "a2", "a3", "a4", "a5"]
    assert (arb.emitted, arb.duplicates, arb.gaps, arb.reordered) == (5, 5, 0, 0)
    assert out[-1].dropped_since_switch == 4


def test_first_copy_wins_whichever_group_sent_it() -> None:
    """The copy that arrives first is emitted, with its source; a racing loser is no switch."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "a", "p1/a", 0.0)
    arb.offer("X", 1, "b", "p2/a", 0.0)
    out = arb.offer("X", 2, "b", "p2/a", 0.1)
    arb.offer("X", 2, "a", "p1/a", 0.1)
    assert [(e.seq, e.source, e.switched_from) for e in out] == [(2, "p2/a", None)]
    assert arb.switches == 0


def test_reordered_item_waits_for_the_missing_seq_within_the_window() -> None:
    """3 before 2: 3 is held, then 2 arrives in time and both are emitted in order, no gap."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "1", "p1/a", 0.0)
    assert arb.offer("X", 3, "3", "p1/a", 1.0) == []
    assert arb.next_deadline() == pytest.approx(1.0 + W)
    out = arb.offer("X", 2, "2", "p2/a", 1.0 + W / 2)
    assert seqs(out) == [2, 3]
    assert [e.gap_before for e in out] == [0, 0]
    assert (arb.gaps, arb.reordered) == (0, 1)
    assert arb.next_deadline() is None
    assert arb.expire(10.0) == []


def test_true_gap_is_declared_after_the_window_with_the_missing_count() -> None:
    """4, 5 after 1 with 2 and 3 never coming: held until the window ends, then gap of 2."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "1", "p1/a", 0.0)
    assert arb.offer("X", 4, "4", "p1/a", 1.0) == []
    assert arb.offer("X", 5, "5", "p1/a", 1.01) == []
    assert arb.expire(1.0 + W * 0.99) == []
    out = arb.expire(1.0 + W)
    assert seqs(out) == [4, 5]
    assert [e.gap_before for e in out] == [2, 0]
    assert (arb.gaps, arb.gap_events, arb.reordered) == (2, 1, 2)
    assert arb.high_water("X") == 5
    assert arb.offer("X", 2, "2", "p2/a", 1.2) == [], "a late arrival below hw is a duplicate"
    assert arb.duplicates == 1


def test_held_item_is_released_when_the_missing_one_arrives() -> None:
    """2, 3 held behind a missing 1-after-hw; the late seq releases all contiguous successors."""
    arb: Arbiter[str] = Arbiter(W)
    arb.set_high_water("X", 10)
    assert arb.offer("X", 12, "12", "p1/a", 0.0) == []
    assert arb.offer("X", 13, "13", "p1/a", 0.0) == []
    assert arb.offer("X", 15, "15", "p1/a", 0.0) == []
    assert arb.held_count() == 3
    out = arb.offer("X", 11, "11", "p2/a", 0.01)
    assert seqs(out) == [11, 12, 13]
    assert arb.held_count() == 1, "15 still waits for 14"
    assert seqs(arb.offer("X", 14, "14", "p2/a", 0.02)) == [14, 15]
    assert arb.gaps == 0


def test_each_held_item_waits_at_most_its_own_window() -> None:
    """A later-held item beyond a second hole keeps its own deadline after the first expires."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "1", "p1/a", 0.0)
    arb.offer("X", 3, "3", "p1/a", 1.0)
    arb.offer("X", 6, "6", "p1/a", 1.0 + W / 2)
    assert seqs(arb.expire(1.0 + W)) == [3]
    assert arb.next_deadline() == pytest.approx(1.0 + W / 2 + W)
    out = arb.expire(1.0 + W / 2 + W)
    assert [(e.seq, e.gap_before) for e in out] == [(6, 2)]
    assert (arb.gaps, arb.gap_events) == (3, 2)


def test_held_lists_the_items_waiting_in_the_window() -> None:
    """held() returns the waiting items (the relay must not commit past them), then none."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "x1", "p1/a", 0.0)
    arb.offer("X", 3, "x3", "p1/a", 0.0)
    arb.offer("Y", 1, "y1", "p1/a", 0.0)
    arb.offer("Y", 4, "y4", "p1/a", 0.0)
    assert sorted(arb.held()) == ["x3", "y4"]
    assert arb.held_count() == 2
    arb.expire(W)
    assert arb.held() == []


def test_copy_of_a_held_seq_is_a_duplicate() -> None:
    """The second copy of an item already held is dropped, not held or emitted twice."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "1", "p1/a", 0.0)
    arb.offer("X", 3, "3a", "p1/a", 0.0)
    arb.offer("X", 3, "3b", "p2/a", 0.0)
    out = arb.expire(W)
    assert [(e.seq, e.item) for e in out] == [(3, "3a")]
    assert arb.duplicates == 1


def test_zero_window_declares_gaps_at_once() -> None:
    """With a 0 s window (a subscriber reading the relay's output) a jump is emitted at once."""
    arb: Arbiter[str] = Arbiter(0.0)
    arb.offer("X", 1, "1", "relay", 0.0)
    out = arb.offer("X", 4, "4", "relay", 0.0)
    assert [(e.seq, e.gap_before) for e in out] == [(4, 2)]
    assert arb.next_deadline() is None


def test_restart_from_rebuilt_high_water_marks_never_reemits() -> None:
    """After set_high_water nothing at or below the mark is emitted; a higher mark is kept."""
    arb: Arbiter[str] = Arbiter(W)
    arb.set_high_water("X", 100)
    arb.set_high_water("X", 90)
    arb.set_high_water("Y", 7)
    assert arb.high_water("X") == 100
    out: list[Emission[str]] = []
    for s in range(95, 104):
        out += arb.offer("X", s, str(s), "p1/a", 0.0)
        out += arb.offer("X", s, str(s), "p2/a", 0.0)
    out += arb.offer("Y", 7, "7", "p1/a", 0.0)
    out += arb.offer("Y", 8, "8", "p1/a", 0.0)
    assert [(e.instrument, e.seq) for e in out] == [("X", s) for s in range(101, 104)] + [("Y", 8)]
    assert arb.duplicates == 2 * 6 + 3 + 1
    assert arb.high_water("Z") is None


def test_high_water_mark_drops_held_items_below_it() -> None:
    """Raising the mark over held items drops them as duplicates; none is emitted later."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "1", "p1/a", 0.0)
    arb.offer("X", 3, "3", "p1/a", 0.0)
    arb.set_high_water("X", 5)
    assert arb.held_count() == 0
    assert arb.expire(1.0) == []
    assert arb.next_deadline() is None
    assert seqs(arb.offer("X", 6, "6", "p1/a", 1.0)) == [6]


def test_instruments_are_independent() -> None:
    """A gap held on one instrument does not delay or affect another."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("A", 1, "a1", "p1/a", 0.0)
    arb.offer("B", 1, "b1", "p1/a", 0.0)
    assert arb.offer("A", 3, "a3", "p1/a", 0.0) == []
    assert seqs(arb.offer("B", 2, "b2", "p1/a", 0.0)) == [2]
    out = arb.expire(W)
    assert [(e.instrument, e.seq, e.gap_before) for e in out] == [("A", 3, 1)]
    assert (arb.high_water("A"), arb.high_water("B")) == (3, 2)
    arb.forget(["A"])
    assert arb.high_water("A") is None
    assert arb.instruments() == ["B"]


def test_forgotten_instrument_discards_held_items() -> None:
    """forget() discards held items: nothing is released for it on expiry."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("A", 1, "a1", "p1/a", 0.0)
    arb.offer("A", 3, "a3", "p1/a", 0.0)
    arb.forget(["A"])
    assert arb.next_deadline() is None
    assert arb.expire(1.0) == []


def test_next_deadline_is_the_earliest_pending_expiry() -> None:
    """next_deadline is the earliest held item's arrival plus the window, across instruments."""
    arb: Arbiter[str] = Arbiter(W)
    assert arb.next_deadline() is None
    for name in ("A", "B"):
        arb.offer(name, 1, "1", "p1/a", 0.0)
    arb.offer("B", 3, "3", "p1/a", 2.0)
    arb.offer("A", 3, "3", "p1/a", 2.5)
    assert arb.next_deadline() == pytest.approx(2.0 + W)
    arb.offer("B", 2, "2", "p1/a", 2.01)
    assert arb.next_deadline() == pytest.approx(2.5 + W)


def test_switch_reports_from_to_silence_and_dropped_duplicates() -> None:
    """p1 dies after seq 3: the switch to p2 carries from/to, the silence and the dups dropped."""
    arb: Arbiter[str] = Arbiter(W)
    t = 0.0
    for s in range(1, 4):
        t = s * 0.1
        arb.offer("X", s, "", "p1/a", t)
        arb.offer("X", s, "", "p2/a", t + 0.001)
    # p1/a is gone; p2/a's 4 could still be a race, its 5 proves p1/a missed 4.
    first = arb.offer("X", 4, "", "p2/a", 0.4)
    second = arb.offer("X", 5, "", "p2/a", 0.7)
    assert first[0].switched_from is None
    switch = second[0]
    assert (switch.switched_from, switch.source) == ("p1/a", "p2/a")
    assert switch.silence_s == pytest.approx(0.3)
    assert switch.dropped_since_switch == 3
    assert arb.switches == 1
    after = arb.offer("X", 6, "", "p2/a", 0.8)
    assert after[0].switched_from is None
    assert after[0].dropped_since_switch == 0


def test_new_member_of_the_old_group_does_not_steal_back() -> None:
    """After the switch, the failed group's new leader re-sending old seqs is no switch back."""
    arb: Arbiter[str] = Arbiter(W)
    arb.offer("X", 1, "", "p1/a", 0.0)
    for s in (2, 3):
        arb.offer("X", s, "", "p2/a", s)
    assert arb.switches == 1
    out: list[Emission[str]] = []
    for s in (2, 3):
        out += arb.offer("X", s, "", "p1/b", 4.0)
    out += arb.offer("X", 4, "", "p2/a", 4.1)
    out += arb.offer("X", 4, "", "p1/b", 4.1)
    assert [(e.seq, e.source, e.switched_from) for e in out] == [(4, "p2/a", None)]
    assert arb.switches == 1


def test_negative_window_is_rejected() -> None:
    """A negative reorder window is a programming error."""
    with pytest.raises(ValueError, match="reorder_window_s"):
        Arbiter(-0.1)


def _run(arb: Arbiter[int], offers: list[tuple[str, int, str]]) -> list[Emission[int]]:
    """Offers everything at advancing times, expiring on the way and at the end."""
    out: list[Emission[int]] = []
    now = 0.0
    for instrument, seq, source in offers:
        now += 0.001
        out += arb.expire(now)
        out += arb.offer(instrument, seq, seq, source, now)
    out += arb.expire(now + 1.0)
    return out


def _interleave(
    rng: random.Random, a: list[int], b: list[int], jitter: int
) -> list[tuple[int, int]]:
    """Merge two in-order copies, each element displaced by up to ``jitter`` seqs.

    Seq 1 comes first, as when a partition is read from its beginning: the arbiter starts an
    instrument's stream at the first seq it sees.
    """
    keyed = [(s + rng.uniform(0, jitter) if s > 1 else -1.0, 0, s) for s in a]
    keyed += [(s + rng.uniform(0, jitter) if s > 1 else -1.0, 1, s) for s in b]
    keyed.sort()
    return [(copy, s) for _, copy, s in keyed]


@pytest.mark.parametrize("seed", range(8))
def test_random_losses_from_one_copy_give_everything_once_in_order(seed: int) -> None:
    """Two shuffled copies of 1..N, losses only from one: output is exactly 1..N, no gaps."""
    rng = random.Random(seed)
    n = 2000
    full = list(range(1, n + 1))
    lossy = [s for s in full if s == 1 or rng.random() > 0.1]
    a, b = (full, lossy) if rng.random() < 0.5 else (lossy, full)
    merged = _interleave(rng, a, b, jitter=5)
    arb: Arbiter[int] = Arbiter(reorder_window_s=1.0)  # the window spans any jitter here
    out = _run(arb, [("X", s, f"p{copy + 1}/a") for copy, s in merged])
    assert seqs(out) == full
    assert (arb.gaps, arb.gap_events) == (0, 0)
    assert arb.duplicates == len(lossy)
    assert arb.reordered > 0, "the interleaving should have reordered something"
    assert arb.held_count() == 0


@pytest.mark.parametrize("seed", range(8))
def test_random_losses_from_both_copies_count_exactly_the_true_gaps(seed: int) -> None:
    """Losses from both copies: output strictly increasing, gaps = seqs missing from both."""
    rng = random.Random(1000 + seed)
    n = 3000
    instruments = ["A", "B", "C"]
    offers: list[tuple[str, int, str]] = []
    missing_both = 0
    per_instrument: dict[str, list[tuple[str, int, str]]] = {}
    for name in instruments:
        a = [s for s in range(1, n + 1) if rng.random() > 0.2]
        b = [s for s in range(1, n + 1) if rng.random() > 0.2]
        if 1 not in a:
            a.insert(0, 1)
        have = set(a) | set(b)
        # A gap at the very end is never declared: nothing follows it.
        missing_both += sum(1 for s in range(1, max(have)) if s not in have)
        per_instrument[name] = [
            (name, s, f"p{copy + 1}/a") for copy, s in _interleave(rng, a, b, jitter=4)
        ]
    # Interleave the instruments too, keeping each one's own order.
    cursors = dict.fromkeys(instruments, 0)
    while cursors:
        name = rng.choice(list(cursors))
        offers.append(per_instrument[name][cursors[name]])
        cursors[name] += 1
        if cursors[name] == len(per_instrument[name]):
            del cursors[name]
    arb: Arbiter[int] = Arbiter(reorder_window_s=0.5)
    out = _run(arb, offers)
    for name in instruments:
        got = [e.seq for e in out if e.instrument == name]
        assert all(x < y for x, y in itertools.pairwise(got)), f"{name} out of order"
        assert sum(e.gap_before for e in out if e.instrument == name) == (
            got[-1] - got[0] + 1 - len(got)
        )
    assert arb.gaps == missing_both
    assert arb.reordered > 0
    assert arb.emitted == len(out)
    assert arb.held_count() == 0


@pytest.mark.parametrize("seed", range(4))
def test_lines_holding_nothing_share_no_state(seed: int) -> None:
    """A line that holds nothing uses the one shared empty ``held``; holding gives it a dict of
    its own, which it drops when emptied. The shared one is never written to, whatever the
    mix of holds, releases, expiries and high-water marks."""
    from pricing_ha.dedupe import _lines

    rng = random.Random(2000 + seed)
    arb: Arbiter[int] = Arbiter(reorder_window_s=0.05)
    now = 0.0
    emitted: dict[str, list[int]] = {}
    for _ in range(4000):
        name = rng.choice("ABCDEFGH")
        now += 0.001
        for e in arb.expire(now):
            emitted.setdefault(e.instrument, []).append(e.seq)
        if rng.random() < 0.02:
            arb.set_high_water(name, rng.randint(1, 400))
            continue
        for e in arb.offer(name, rng.randint(1, 400), 0, rng.choice(["p1/a", "p2/a"]), now):
            emitted.setdefault(e.instrument, []).append(e.seq)
        assert _lines.NOTHING_HELD == {}
    lines = arb._lines.values()
    assert any(line.held is _lines.NOTHING_HELD for line in lines)
    for line in lines:
        assert (line.held is _lines.NOTHING_HELD) == (not line.held)
    for got in emitted.values():
        assert all(x < y for x, y in itertools.pairwise(got))
    arb.expire(now + 1.0)
    assert all(line.held is _lines.NOTHING_HELD for line in arb._lines.values())
