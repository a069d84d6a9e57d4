"""Arbitration by (epoch, seq) with bounds on unconfirmed copies (dedupe.arbitration)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from pricing_ha.dedupe.arbitration import Arbiter, Bounds, Emission
from pricing_ha.publishing.epochs import MAX_EPOCH, out_of_bounds, position
from pricing_ha.publishing.quotes import MAX_SEQ

W = 0.5  # reorder window (s), also the confirmation timeout
NOW_MS = 1_800_000_000_000  # the wall clock the bounds read
E1 = NOW_MS - 3_600_000  # an epoch an hour old (the feed's start)
E2 = NOW_MS - 1_000  # a restarted feed's epoch
JUMP = 1000


def _arbiter() -> Arbiter[str]:
    bounds = Bounds(max_seq_jump=JUMP, max_epoch_skew_ms=60_000, clock_ms=lambda: NOW_MS)
    return Arbiter(W, bounds)


def _both(arb: Arbiter[str], seq: int, epoch: int, now: float) -> list[Emission[str]]:
    """Both groups' copies of one position, P1's first."""
    out = arb.offer("X", seq, f"a{seq}", "p1/a", now, epoch=epoch)
    return out + arb.offer("X", seq, f"b{seq}", "p2/a", now, epoch=epoch)


def _pairs(out: list[Emission[str]]) -> list[tuple[int, int]]:
    return [(e.epoch, e.seq) for e in out]


@given(
    st.tuples(st.integers(0, MAX_EPOCH), st.integers(1, MAX_SEQ)),
    st.tuples(st.integers(0, MAX_EPOCH), st.integers(1, MAX_SEQ)),
)
def test_positions_order_as_epoch_then_seq(a: tuple[int, int], b: tuple[int, int]) -> None:
    """position() orders any two (epoch, seq) pairs exactly as the pairs compare."""
    assert (position(*a) < position(*b)) == (a < b)
    assert (position(*a) == position(*b)) == (a == b)


def test_bounds_name_the_jump_and_the_epoch_skew() -> None:
    """Jumps past the bound and far-future epochs are out of bounds; new epochs count from 0."""
    mark = position(E1, 100)
    kw = {"now_ms": NOW_MS, "max_seq_jump": JUMP, "max_epoch_skew_ms": 60_000}
    assert out_of_bounds(mark, position(E1, 100 + JUMP), **kw) is None
    assert "jumps by 1001" in (out_of_bounds(mark, position(E1, 101 + JUMP), **kw) or "")
    assert out_of_bounds(mark, position(E2, JUMP), **kw) is None
    assert "from the epoch's start" in (out_of_bounds(mark, position(E2, JUMP + 1), **kw) or "")
    assert "ahead of the clock" in (out_of_bounds(mark, position(NOW_MS + 60_001, 1), **kw) or "")


def test_a_forged_max_seq_from_one_group_never_moves_the_mark() -> None:
    """Seq 2^63-1 from one group alone is rejected after the window; real seqs go on."""
    arb = _arbiter()
    out = _both(arb, 1, E1, 0.0)
    out += arb.offer("X", MAX_SEQ, "forged", "p1/a", 0.1, epoch=E1)
    out += _both(arb, 2, E1, 0.2)
    out += arb.expire(0.7)
    out += _both(arb, 3, E1, 0.8)
    assert _pairs(out) == [(E1, 1), (E1, 2), (E1, 3)]
    rejected = arb.take_rejected()
    assert [item for item, _ in rejected] == ["forged"]
    assert "jumps by" in rejected[0][1]
    assert "not confirmed" in rejected[0][1]
    assert arb.high_water("X") == position(E1, 3)
    assert (arb.gaps, arb.unconfirmed) == (0, 1)


def test_a_forged_max_seq_with_no_mark_yet_is_rejected_once_real_prices_flow() -> None:
    """A first copy beyond the bound waits; real prices meanwhile make it a hard reject."""
    arb = _arbiter()
    out = arb.offer("X", MAX_SEQ, "forged", "p1/a", 0.0, epoch=E1)
    out += _both(arb, 7, E1, 0.1)
    out += arb.expire(0.6)
    assert _pairs(out) == [(E1, 7)]
    assert [item for item, _ in arb.take_rejected()] == ["forged"]


def test_a_jump_both_groups_publish_is_confirmed_at_once() -> None:
    """A jump past the bound that the other group confirms is placed (here after its window)."""
    arb = _arbiter()
    _both(arb, 1, E1, 0.0)
    assert arb.offer("X", 5000, "a", "p1/a", 0.1, epoch=E1) == []
    assert arb.offer("X", 5000, "b", "p2/b", 0.1, epoch=E1) == []  # confirmed: now a gap
    out = arb.expire(0.6)
    assert _pairs(out) == [(E1, 5000)]
    assert out[0].gap_before == 4998
    assert (arb.confirmed, arb.take_rejected()) == (1, [])


def test_same_group_copies_do_not_confirm_each_other() -> None:
    """Two members of one group publishing the same jump are still one group's word."""
    arb = _arbiter()
    _both(arb, 1, E1, 0.0)
    arb.offer("X", 5000, "a", "p1/a", 0.1, epoch=E1)
    arb.offer("X", 5000, "a2", "p1/b", 0.1, epoch=E1)
    arb.expire(0.7)
    assert [item for item, _ in arb.take_rejected()] == ["a"]


def test_a_feed_restart_is_emitted_as_soon_as_the_other_group_confirms() -> None:
    """Epoch E2 from seq 1 after E1 seq 900: emitted on the second copy, then in order."""
    arb = _arbiter()
    for s in range(899, 901):
        _both(arb, s, E1, 0.0)
    assert arb.offer("X", 1, "a1", "p1/a", 1.0, epoch=E2) == []
    out = arb.offer("X", 1, "b1", "p2/a", 1.01, epoch=E2)
    out += _both(arb, 2, E2, 1.02)
    out += _both(arb, 900, E1, 1.03)  # a late copy of the old epoch: a duplicate
    assert _pairs(out) == [(E2, 1), (E2, 2)]
    assert out[0].gap_before == 0
    assert arb.gaps == 0


def test_a_feed_restart_seen_by_one_group_resumes_after_one_window() -> None:
    """With one group, the old epoch quiet: the new epoch is accepted after the window."""
    arb = _arbiter()
    arb.offer("X", 900, "a", "p1/a", 0.0, epoch=E1)
    out = arb.offer("X", 1, "n1", "p1/a", 1.0, epoch=E2)
    out += arb.offer("X", 2, "n2", "p1/a", 1.1, epoch=E2)
    out += arb.expire(1.0 + W)
    out += arb.offer("X", 3, "n3", "p1/a", 1.6, epoch=E2)
    assert _pairs(out) == [(E2, 1), (E2, 2), (E2, 3)]
    assert arb.take_rejected() == []


def test_a_restart_seen_by_one_group_keeps_every_seq_when_the_expiry_comes_late() -> None:
    """A late expiry decides several of the new epoch's suspects at once: all emitted, in order."""
    arb = _arbiter()
    arb.offer("X", 900, "a", "p1/a", 0.0, epoch=E1)
    out = arb.offer("X", 1, "n1", "p1/a", 1.0, epoch=E2)
    out += arb.offer("X", 2, "n2", "p1/a", 1.1, epoch=E2)
    out += arb.offer("X", 3, "n3", "p1/a", 1.2, epoch=E2)
    out += arb.offer("X", 4, "n4", "p1/a", 1.3, epoch=E2)
    out += arb.expire(1.0 + W + 0.25)  # the caller ran late: seqs 1-3 have all waited W
    out += arb.expire(1.3 + W)
    assert _pairs(out) == [(E2, 1), (E2, 2), (E2, 3), (E2, 4)]
    assert arb.take_rejected() == []
    assert arb.gaps == 0


def test_a_forged_new_epoch_is_rejected_while_the_current_epoch_goes_on() -> None:
    """An unconfirmed later epoch, with the current one still emitting, is rejected."""
    arb = _arbiter()
    _both(arb, 1, E1, 0.0)
    arb.offer("X", 1, "forged", "p2/x", 0.1, epoch=E2)
    out = _both(arb, 2, E1, 0.2)
    out += arb.expire(0.7)
    out += _both(arb, 3, E1, 0.8)
    assert _pairs(out) == [(E1, 2), (E1, 3)]
    assert [item for item, _ in arb.take_rejected()] == ["forged"]


def test_an_epoch_far_ahead_of_the_clock_is_rejected_even_alone() -> None:
    """An epoch beyond the skew bound, unconfirmed, is rejected though nothing else came."""
    arb = _arbiter()
    _both(arb, 1, E1, 0.0)
    arb.offer("X", 1, "future", "p1/a", 0.1, epoch=NOW_MS + 3_600_000)
    assert arb.expire(0.7) == []
    assert "ahead of the clock" in arb.take_rejected()[0][1]


def test_suspects_are_held_against_commits() -> None:
    """A suspect is among held() until decided (its input offset must not be committed)."""
    arb = _arbiter()
    _both(arb, 1, E1, 0.0)
    arb.offer("X", MAX_SEQ, "forged", "p1/a", 0.1, epoch=E1)
    assert (arb.held(), arb.held_count(), arb.next_deadline()) == (["forged"], 1, 0.1 + W)
    arb.expire(0.7)
    assert (arb.held(), arb.next_deadline()) == ([], None)


def test_reset_mark_lets_the_next_copy_start_the_line_again() -> None:
    """After reset_mark, a stream below the old (poisoned) mark is emitted again."""
    arb: Arbiter[str] = Arbiter(W)  # no bounds: the poison gets through
    arb.offer("X", MAX_SEQ, "poison", "p1/a", 0.0, epoch=E1)
    assert arb.offer("X", 10, "real", "p1/a", 0.1, epoch=E1) == []
    assert arb.reset_mark("X") == position(E1, MAX_SEQ)
    assert _pairs(arb.offer("X", 11, "real", "p1/a", 0.2, epoch=E1)) == [(E1, 11)]
    assert arb.reset_mark("Y") is None


def test_without_epochs_positions_are_plain_seqs() -> None:
    """Epoch 0 (older feeds) keeps marks equal to seqs, as before epochs."""
    arb = _arbiter()
    _both(arb, 5, 0, 0.0)
    assert arb.high_water("X") == 5


_offers = st.lists(
    st.tuples(
        st.sampled_from([E1, E2, NOW_MS + 3_600_000]),  # the last: far ahead of the clock
        st.one_of(st.integers(1, 30), st.just(MAX_SEQ), st.integers(1, 2 * JUMP)),
        st.sampled_from(["p1/a", "p1/b", "p2/a"]),
        st.floats(0.0, 0.3),
    ),
    max_size=60,
)


@given(_offers)
def test_whatever_is_offered_positions_only_rise_and_no_lone_jump_is_emitted(
    offers: list[tuple[int, int, str, float]],
) -> None:
    """Emitted (epoch, seq) strictly increase; a far-future epoch or seq 2^63-1 offered by one
    group only is never emitted."""
    arb = _arbiter()
    now = 0.0
    out: list[Emission[str]] = []
    groups: dict[tuple[int, int], set[str]] = {}
    for epoch, seq, source, step in offers:
        now += step
        out += arb.expire(now)
        out += arb.offer("X", seq, source, source, now, epoch=epoch)
        groups.setdefault((epoch, seq), set()).add(source.split("/")[0])
    out += arb.expire(now + 10 * W)
    got = _pairs(out)
    assert all(a < b for a, b in itertools.pairwise(got))
    for pair in got:
        if pair[0] > NOW_MS + 60_000 or pair[1] == MAX_SEQ:
            assert len(groups[pair]) == 2, pair
    assert arb.held_count() == 0


def test_a_first_jump_with_no_mark_needs_its_next_seq_from_one_group() -> None:
    """With no mark, seq 50000 alone is rejected; 60000 followed by 60001 is accepted."""
    arb = _arbiter()
    assert arb.offer("X", 50_000, "lone", "p1/a", 0.0, epoch=E1) == []
    assert arb.expire(W) == []
    assert [item for item, _ in arb.take_rejected()] == ["lone"]
    arb.offer("X", 60_000, "a", "p1/a", 1.0, epoch=E1)
    arb.offer("X", 60_001, "b", "p1/a", 1.1, epoch=E1)
    assert _pairs(arb.expire(1.0 + W)) == [(E1, 60_000), (E1, 60_001)]
    assert arb.take_rejected() == []


def test_seqs_held_in_an_epoch_overtaken_by_a_restart_are_declared_missing_not_emitted() -> None:
    """E1 seq 3 held for seq 2, then seq 1 of a later epoch goes out: E1/3 never follows it."""
    arb = _arbiter()
    out = arb.offer("X", 1, "p1/a", "p1/a", 0.0, epoch=E1)
    out += arb.offer("X", 3, "p1/a", "p1/a", 0.0, epoch=E1)
    out += arb.offer("X", 1, "p1/a", "p1/a", 0.0, epoch=E2)
    out += arb.expire(10 * W)
    assert _pairs(out) == [(E1, 1), (E2, 1)]
    assert arb.gaps >= 1
