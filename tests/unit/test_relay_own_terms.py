"""The relay's first-hand knowledge of its own terms (:mod:`pricing_ha.dedupe.own_terms`)."""

from __future__ import annotations

import time

from pricing_ha.dedupe.control import Snapshot
from pricing_ha.dedupe.own_terms import OwnTerms

SETTLE_S = 2.2


def _own(last: dict[int, float], held: set[int]) -> OwnTerms:
    return OwnTerms(settle_s=SETTLE_S, last_produced=last, held=held.__contains__)


def _below(term: int) -> Snapshot:
    return Snapshot(offset=100, high={}, clean=False, term=term, handing_over=True)


def test_a_term_it_began_and_ended_is_settled_once_its_output_has_landed_or_expired() -> None:
    now = time.monotonic()
    last = {0: now - 3.0}
    own = _own(last, held=set())
    own.began(0, 40)
    assert own.ended(0, _below(40))
    assert own.settled(0, _below(40), marked_at=now)
    # The marker was produced too soon after the last record: one may lie above it.
    assert not own.settled(0, _below(40), marked_at=now - 1.0)
    assert own.settles_in(0) == 0.0
    last[0] = now  # read live: a record produced just now
    assert not own.settled(0, _below(40), marked_at=now)
    assert SETTLE_S - 0.5 < own.settles_in(0) <= SETTLE_S


def test_only_a_term_it_began_and_no_longer_holds_counts() -> None:
    now = time.monotonic()
    held: set[int] = set()
    own = _own({0: now - 10.0}, held)
    own.began(0, 40)
    # Another member's term, a marker of its own that never began, no term at all.
    for term in (39, 41, -1):
        assert not own.ended(0, _below(term))
        assert not own.settled(0, _below(term), marked_at=now)
    assert not own.ended(1, _below(40))  # another partition
    held.add(0)  # it holds the partition (still emitting under a term)
    assert not own.ended(0, _below(40))
    assert not own.settled(0, _below(40), marked_at=now)


def test_a_term_with_nothing_produced_is_settled_at_once() -> None:
    own = _own({}, held=set())
    own.began(2, 7)
    assert own.settled(2, _below(7), marked_at=time.monotonic())
    assert own.settles_in(2) == 0.0


def test_only_the_latest_terms_are_remembered() -> None:
    now = time.monotonic()
    own = _own({}, held=set())
    for term in range(20):
        own.began(0, term)
    assert own.ended(0, _below(19))
    assert not own.ended(0, _below(0))
    assert own.settled(0, _below(19), marked_at=now)
