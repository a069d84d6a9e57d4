"""The relay's per-partition lifecycle: every legal transition taken, every other refused."""

from __future__ import annotations

import itertools

import pytest

from pricing_ha.dedupe.lifecycle import (
    INITIAL,
    TRANSITIONS,
    LifecycleError,
    PartitionLifecycle,
    PartitionState,
    lifecycles,
)

S = PartitionState

_LEGAL = [(a, b) for a, targets in TRANSITIONS.items() for b in sorted(targets, key=str)]
_ILLEGAL = [(a, b) for a, b in itertools.product(S, S) if b not in TRANSITIONS[a]]

# The paths the relay takes a partition along (relay_worker, grace_period, suspicion, handover).
_PATHS = {
    "planned move in": [S.PROBING, S.TAKING_OVER, S.OWNING],
    "assigned after the grace period": [S.TAKING_OVER, S.OWNING],
    "grace period over, not taken up": [S.PROBING, S.STANDBY],
    "takeover on suspicion, held": [S.SUSPECTING, S.TAKING_OVER, S.OWNING, S.HANDING_OVER],
    "deferred, retried": [S.TAKING_OVER, S.STANDBY, S.TAKING_OVER, S.OWNING],
    "planned move out": [S.TAKING_OVER, S.OWNING, S.HANDING_OVER, S.STANDBY],
    "given back": [S.TAKING_OVER, S.OWNING, S.HANDING_OVER, S.OWNING],
    "dropped": [S.TAKING_OVER, S.OWNING, S.STANDBY],
}


def _at(state: PartitionState) -> PartitionLifecycle:
    lc = PartitionLifecycle(3)
    lc.state = state
    return lc


def test_every_partition_starts_in_standby_without_a_term() -> None:
    """A fresh table has one STANDBY lifecycle per partition, none owned."""
    table = lifecycles(4)
    assert sorted(table) == [0, 1, 2, 3]
    assert all(lc.state is INITIAL is S.STANDBY and not lc.owned for lc in table.values())
    assert [lc.partition for lc in table.values()] == [0, 1, 2, 3]


@pytest.mark.parametrize(("source", "target"), _LEGAL, ids=lambda s: s.name)
def test_each_legal_transition_is_taken(source: PartitionState, target: PartitionState) -> None:
    """A transition in the table moves the partition to its target state."""
    lc = _at(source)
    lc.move(target)
    assert lc.state is target


@pytest.mark.parametrize(("source", "target"), _ILLEGAL, ids=lambda s: s.name)
def test_each_illegal_transition_is_refused(source: PartitionState, target: PartitionState) -> None:
    """A transition not in the table raises, naming partition and states, and changes nothing."""
    lc = _at(source)
    with pytest.raises(LifecycleError) as caught:
        lc.move(target)
    assert caught.value.partition == 3
    assert (caught.value.source, caught.value.target) == (source, target)
    assert f"partition 3: illegal transition {source.name} -> {target.name}" in str(caught.value)
    assert lc.state is source


@pytest.mark.parametrize("name", sorted(_PATHS))
def test_the_relays_paths_are_legal(name: str) -> None:
    """Each path the relay takes a partition along is accepted from STANDBY."""
    lc = PartitionLifecycle(0)
    for state in _PATHS[name]:
        lc.move(state)
    assert lc.state is _PATHS[name][-1]


def test_every_state_is_reachable_and_leads_back_to_standby() -> None:
    """No state is unreachable from STANDBY, and from each one STANDBY can be reached again."""

    def reach(start: PartitionState) -> set[PartitionState]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in TRANSITIONS[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    assert reach(S.STANDBY) == set(S)
    assert all(S.STANDBY in reach(s) for s in S)
    assert all(any(S.STANDBY in reach(t) for t in TRANSITIONS[s]) for s in S)


def test_the_term_is_kept_while_owned_and_forgotten_on_letting_go() -> None:
    """own() sets the term; a hand-over keeps it; returning to STANDBY forgets it."""
    lc = PartitionLifecycle(5)
    lc.move(S.TAKING_OVER)
    lc.own(1234)
    assert (lc.owned, lc.term, lc.handing_over) == (True, 1234, False)
    lc.move(S.HANDING_OVER)
    assert (lc.owned, lc.term, lc.handing_over) == (True, 1234, True)
    lc.move(S.STANDBY)
    assert (lc.owned, lc.term, lc.handing_over) == (False, None, False)


def test_own_is_refused_unless_taking_over() -> None:
    """A term can only be taken at the end of a takeover."""
    lc = PartitionLifecycle(1)
    with pytest.raises(LifecycleError, match="STANDBY -> OWNING"):
        lc.own(7)
    assert lc.term is None
