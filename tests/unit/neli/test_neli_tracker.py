"""LeadershipTracker: what holds in every variant and mode, and the transitions it reports.

The rules particular to one variant or mode are in ``test_neli_tracker_variants.py``.
"""

from __future__ import annotations

import pytest

from neli import EventKind, Mode, Variant
from neli._tracker import Transition
from tests.unit.neli.neli_tracker_harness import COMBOS, EPS, ME, OTHER, STEP, Member, T

P = 3


@pytest.fixture(params=COMBOS)
def member(request: pytest.FixtureRequest) -> Member:
    """A fresh member for each of the four (variant, mode) combinations."""
    variant, mode = request.param
    return Member(variant, mode)


# -- every variant and mode -------------------------------------------------------------------


def test_not_leader_before_assignment(member: Member) -> None:
    """Heartbeats on a partition that was never assigned do not make the member lead it."""
    member.beat(P)
    member.beat(P, member_id=ME)
    assert not member.leads(P)
    assert member.why_not(P) == "not assigned"
    assert member.evaluate() == []
    assert member.tracker.led(member.mono, member.wall) == frozenset()


def test_not_leader_after_assignment_until_a_heartbeat(member: Member) -> None:
    """An assigned partition is not led while no qualifying heartbeat has arrived."""
    member.assign(P)
    member.advance(2 * T)
    assert not member.leads(P)
    assert member.why_not(P) == "no heartbeat yet"
    assert member.evaluate() == []
    member.beat(P)
    assert member.leads(P)


def test_acquired_after_a_qualifying_heartbeat(member: Member) -> None:
    """A qualifying heartbeat makes the member lead, and evaluate() reports ACQUIRED once."""
    acquired = member.lead(P)
    assert acquired == Transition(EventKind.ACQUIRED, P, "assigned")
    assert member.why_not(P) is None
    assert member.evaluate() == []


def test_leadership_expires_exactly_at_threshold(member: Member) -> None:
    """Leadership holds until just before T after the last heartbeat and ends at exactly T."""
    member.lead(P)
    member.advance(T - EPS)
    assert member.leads(P)
    member.advance(EPS)
    assert not member.leads(P)
    assert member.why_not(P) == member.stale_reason
    member.advance(T)
    assert not member.leads(P)


def test_fenced_when_stale_while_still_assigned(member: Member) -> None:
    """Going stale while assigned yields FENCED with the stale reason and the term's start."""
    member.lead(P)
    started = member.wall
    member.advance(T)
    assert member.evaluate() == [
        Transition(EventKind.FENCED, P, member.stale_reason, term_started_wall=started)
    ]
    assert P in member.tracker.assigned()
    assert member.evaluate() == []


def test_resumed_when_fresh_again(member: Member) -> None:
    """A fenced partition that gets a fresh heartbeat yields RESUMED and starts a new term."""
    member.lead(P)
    member.advance(T)
    member.evaluate()
    member.advance(STEP)
    member.beat(P)
    resumed_at = member.wall
    assert member.evaluate() == [Transition(EventKind.RESUMED, P, "heartbeats fresh again")]
    member.advance(T)
    assert member.evaluate() == [
        Transition(EventKind.FENCED, P, member.stale_reason, term_started_wall=resumed_at)
    ]


def test_revoke_ends_a_term(member: Member) -> None:
    """revoke() of a led partition returns REVOKED with the reason and the term's start."""
    member.lead(P)
    started = member.wall
    member.advance(STEP)
    assert member.revoke(P, reason="session lost") == [
        Transition(EventKind.REVOKED, P, "session lost", term_started_wall=started)
    ]
    assert not member.leads(P)
    assert member.why_not(P) == "not assigned"
    assert member.evaluate() == []


def test_revoke_of_a_fenced_partition_reports_revoked(member: Member) -> None:
    """A fenced partition that is revoked still yields REVOKED (handlers see the loss)."""
    member.lead(P)
    member.advance(T)
    member.evaluate()
    # The term already ended at FENCED, so the REVOKED closes no term.
    assert member.revoke(P) == [Transition(EventKind.REVOKED, P, "rebalance")]


def test_revoke_of_a_follower_reports_nothing(member: Member) -> None:
    """Revoking a partition that was never led yields no transition."""
    member.assign(P)
    assert member.revoke(P) == []
    assert member.tracker.assigned() == frozenset()


def test_led_and_assigned(member: Member) -> None:
    """led() holds exactly the fresh assigned partitions; assigned() every assigned one."""
    member.assign(0, 1, 2)
    if member.mode is Mode.EXCLUSIVE:
        member.advance(T)  # the grace period
    member.beat(0)
    member.beat(2)
    assert member.tracker.led(member.mono, member.wall) == frozenset({0, 2})
    assert member.tracker.assigned() == frozenset({0, 1, 2})
    assert member.why_not(1) == "no heartbeat yet"


@pytest.mark.parametrize(
    ("variant", "mode", "age"),
    [
        pytest.param(Variant.FULL, Mode.NON_EXCLUSIVE, 0.5, id="full-nonexclusive-receive"),
        pytest.param(Variant.FULL, Mode.EXCLUSIVE, 0.75, id="full-exclusive-publish"),
        pytest.param(Variant.FAST, Mode.NON_EXCLUSIVE, 0.75, id="fast-nonexclusive-sent"),
        pytest.param(Variant.FAST, Mode.EXCLUSIVE, 0.75, id="fast-exclusive-sent"),
    ],
)
def test_freshness_reports_age_per_assigned_partition(
    variant: Variant, mode: Mode, age: float
) -> None:
    """freshness() ages the newest observation by the variant's clock, None when there is none."""
    m = Member(variant, mode)
    m.assign(0, 1)
    m.beat(0, age=0.25)  # sent and published 0.25 s before it arrives
    m.advance(0.5)
    assert m.tracker.freshness(m.mono, m.wall) == {0: age, 1: None}


# -- predecessors -----------------------------------------------------------------------------


def test_acquired_names_the_predecessor(member: Member) -> None:
    """A heartbeat from another member listing the partition as led is ACQUIRED's predecessor."""
    prev = member.heartbeat(P, member_id=OTHER, led=(1, P), meta={"traceparent": "00-ab-cd-01"})
    member.observe(P, prev)
    acquired = member.lead(P)
    assert acquired.predecessor == prev
    assert member.tracker.predecessor(P) == prev


def test_predecessor_is_learned_from_heartbeats_on_any_partition() -> None:
    """A heartbeat read on one partition names its sender as leader of every partition listed."""
    m = Member(Variant.FULL, Mode.NON_EXCLUSIVE)
    prev = m.heartbeat(0, member_id=OTHER, led=(P, 5))
    m.observe(0, prev)
    assert m.tracker.predecessor(P) == prev
    assert m.tracker.predecessor(5) == prev
    assert m.tracker.predecessor(0) is None
    assert m.lead(P).predecessor == prev


def test_predecessor_is_the_latest_leader_heard() -> None:
    """Of several heartbeats naming a leader of the partition, the newest one is the predecessor."""
    m = Member(Variant.FULL, Mode.NON_EXCLUSIVE)
    m.observe(P, m.heartbeat(P, member_id=OTHER, led=(P,)))
    m.advance(STEP)
    latest = m.heartbeat(P, member_id="third/000000000003", led=(P,))
    m.observe(P, latest)
    assert m.lead(P).predecessor == latest


def test_own_heartbeats_and_other_partitions_are_not_predecessors(member: Member) -> None:
    """Neither the member's own heartbeats nor a leader of another partition is a predecessor."""
    member.observe(P, member.heartbeat(P, member_id=ME, led=(P,)))
    member.observe(P, member.heartbeat(P, member_id=OTHER, led=(P + 1,)))
    assert member.lead(P).predecessor is None
    assert member.tracker.predecessor(P) is None


def test_predecessor_comes_from_the_members_own_group() -> None:
    """A leader of the partition in another group sharing the NELI topic is no predecessor."""
    m = Member(Variant.FULL, Mode.NON_EXCLUSIVE)
    prev = m.heartbeat(P, member_id=OTHER, led=(P,))
    m.observe(P, prev)
    m.advance(STEP)
    # Groups p1 and p2 (and the relay) share the NELI topic: p2's leader of P heartbeats here.
    m.observe(P, m.heartbeat(P, member_id="p2-leader/000000000004", group="g2", led=(P,)))
    assert m.lead(P).predecessor == prev


def test_end_grace_cuts_only_an_exclusive_grace_period_short(member: Member) -> None:
    """end_grace(): exclusive mode, assigned and not yet led, within T of the assignment."""
    member.assign(P)
    member.beat(P)
    if member.mode is not Mode.EXCLUSIVE:
        assert member.tracker.in_grace(member.mono) == frozenset()
        assert not member.tracker.end_grace(P, member.mono)
        return
    assert member.tracker.in_grace(member.mono) == frozenset({P})
    assert member.why_not(P) == "grace period"
    assert not member.tracker.end_grace(P + 1, member.mono)  # not assigned
    assert member.tracker.end_grace(P, member.mono)
    assert member.tracker.in_grace(member.mono) == frozenset()
    assert member.why_not(P) is None
    assert member.evaluate() == [Transition(EventKind.ACQUIRED, P, "assigned")]
    assert not member.tracker.end_grace(P, member.mono)  # led: nothing to cut short


@pytest.mark.parametrize("variant", list(Variant))
def test_end_grace_keeps_the_other_conditions(variant: Variant) -> None:
    """Ending the grace does not make a member lead without its heartbeat, nor after a stall."""
    member = Member(variant, Mode.EXCLUSIVE)
    member.assign(P)
    assert member.tracker.end_grace(P, member.mono)
    assert member.why_not(P) == "no heartbeat yet"
    member.jump(T)  # a stall longer than the limit
    member.assign(P + 1)
    member.beat(P + 1)
    assert member.tracker.end_grace(P + 1, member.mono)
    assert member.why_not(P + 1) in ("stalled", "recovering from a stall")


@pytest.mark.parametrize("variant", list(Variant))
def test_a_pause_with_the_monotonic_clock_frozen_is_caught_by_the_wall_clock(
    variant: Variant,
) -> None:
    """Exclusive mode: a wall-clock gap since the last tick beyond the stall limit is a stall."""
    member = Member(variant, Mode.EXCLUSIVE)
    member.lead(P)
    member.tracker.tick(member.mono, member.wall)
    frozen_wall = member.wall + T  # the wall clock moved on; the monotonic one stood still
    assert member.tracker.why_not(P, member.mono, frozen_wall) == "stalled"
    member.tracker.tick(member.mono, frozen_wall)
    assert member.tracker.stalls == 1
    assert member.tracker.why_not(P, member.mono, frozen_wall) == "recovering from a stall"


@pytest.mark.parametrize("variant", list(Variant))
def test_recovering_answers_while_a_stall_holds_the_member_off(variant: Variant) -> None:
    """Exclusive mode: recovering() is true while stalled and while suspect after a stall,
    exactly when leadership is refused for a stall; never in non-exclusive mode."""
    member = Member(variant, Mode.EXCLUSIVE)
    member.lead(P)
    assert not member.tracker.recovering(member.mono, member.wall)
    member.jump(T)  # frozen: no tick for longer than the stall limit
    assert member.tracker.recovering(member.mono, member.wall)
    member.tick()  # woken: suspect for S + 0.5 s (at least T)
    while member.why_not(P) == "recovering from a stall":
        assert member.tracker.recovering(member.mono, member.wall)
        member.advance(STEP, beat=P)
    assert not member.tracker.recovering(member.mono, member.wall)
    other = Member(variant, Mode.NON_EXCLUSIVE)
    other.lead(P)
    other.jump(T)
    assert not other.tracker.recovering(other.mono, other.wall)
