"""LeadershipTracker: the rules particular to one variant or mode, and the stall guard."""

from __future__ import annotations

import pytest

from neli import EventKind, Mode, Variant
from neli._tracker import LeadershipTracker, Transition
from tests.unit.neli.neli_tracker_harness import (
    EPS,
    ME,
    OTHER,
    STALL_LIMIT,
    STEP,
    Member,
    T,
    make_config,
)

P = 3


# -- full NELI, non-exclusive -----------------------------------------------------------------


@pytest.mark.parametrize("sender", [ME, OTHER, "third/000000000003"])
def test_full_nonexclusive_counts_any_members_heartbeat(sender: str) -> None:
    """Full non-exclusive NELI counts a heartbeat from any member, itself included."""
    m = Member(Variant.FULL, Mode.NON_EXCLUSIVE)
    m.assign(P)
    m.beat(P, member_id=sender, incarnation=0)
    assert m.leads(P)


def test_full_nonexclusive_freshness_is_receive_time() -> None:
    """Full non-exclusive freshness is when a record arrives, not when it was sent or published."""
    m = Member(Variant.FULL, Mode.NON_EXCLUSIVE)
    m.assign(P)
    m.observe(P, m.heartbeat(P, age=100.0), publish_wall=m.wall - 100.0)
    assert m.leads(P)
    m.advance(T - EPS)
    assert m.leads(P)
    m.advance(EPS)
    assert not m.leads(P)


@pytest.mark.parametrize("variant", [Variant.FULL, Variant.FAST])
def test_nonexclusive_release_keeps_leading_until_stale(variant: Variant) -> None:
    """A released partition stays led until stale; then evaluate() reports REVOKED and drops it."""
    m = Member(variant, Mode.NON_EXCLUSIVE)
    m.lead(P)
    started = m.wall
    m.advance(STEP)
    assert m.revoke(P, release=True) == []
    assert P not in m.tracker.assigned()
    assert P in m.tracker.led_or_assigned()
    assert m.leads(P)
    m.advance(T - STEP - EPS)
    assert m.leads(P)
    assert m.evaluate() == []
    m.advance(EPS)
    assert not m.leads(P)
    reason = f"rebalance, then {m.stale_reason}"
    assert m.evaluate() == [Transition(EventKind.REVOKED, P, reason, term_started_wall=started)]
    assert m.tracker.led_or_assigned() == frozenset()
    assert m.why_not(P) == "not assigned"
    assert m.evaluate() == []


@pytest.mark.parametrize("variant", [Variant.FULL, Variant.FAST])
def test_nonexclusive_reassign_while_released_keeps_the_term(variant: Variant) -> None:
    """Getting a released partition back while still fresh continues the term: no new ACQUIRED."""
    m = Member(variant, Mode.NON_EXCLUSIVE)
    m.lead(P)
    started = m.wall
    m.advance(STEP)
    m.revoke(P, release=True)
    m.advance(STEP)
    m.assign(P)
    assert P in m.tracker.assigned()
    assert m.evaluate() == []
    m.advance(T)
    assert m.evaluate() == [
        Transition(EventKind.FENCED, P, m.stale_reason, term_started_wall=started)
    ]


def test_release_of_an_unassigned_partition_is_a_no_op() -> None:
    """Releasing a partition the member does not hold neither reports nor keeps anything."""
    m = Member(Variant.FULL, Mode.NON_EXCLUSIVE)
    assert m.revoke(P, release=True) == []
    assert m.tracker.led_or_assigned() == frozenset()


# -- full NELI, exclusive ---------------------------------------------------------------------


def _full_exclusive_past_grace() -> Member:
    m = Member(Variant.FULL, Mode.EXCLUSIVE)
    m.assign(P)
    m.advance(T)
    return m


def test_full_exclusive_freshness_is_publish_time() -> None:
    """A heartbeat received now but published T ago does not make a full exclusive member lead."""
    m = _full_exclusive_past_grace()
    m.beat(P, age=T)
    assert not m.leads(P)
    assert m.why_not(P) == "heartbeats stale"
    m.beat(P, age=T - EPS)
    assert m.leads(P)
    m.advance(EPS)
    assert not m.leads(P)


def test_full_exclusive_record_timestamp_beats_sent_wall() -> None:
    """Full exclusive NELI dates a heartbeat by its record timestamp, not by what it claims."""
    m = _full_exclusive_past_grace()
    m.observe(P, m.heartbeat(P), publish_wall=m.wall - T)
    assert not m.leads(P)


def test_full_exclusive_without_record_timestamp_uses_sent_wall() -> None:
    """With no record timestamp, full exclusive NELI falls back to the heartbeat's sent_wall."""
    m = _full_exclusive_past_grace()
    m.tracker.observe(P, m.heartbeat(P, age=T), None, m.mono)
    assert not m.leads(P)
    m.tracker.observe(P, m.heartbeat(P, age=STEP), None, m.mono)
    assert m.leads(P)


def test_full_exclusive_grace_period_after_assignment() -> None:
    """A full exclusive member waits T after assignment before leading, fresh heartbeats or not."""
    m = Member(Variant.FULL, Mode.EXCLUSIVE)
    m.assign(P)
    m.beat(P)
    assert m.why_not(P) == "grace period"
    m.advance(T - EPS, beat=P)
    assert not m.leads(P)
    assert m.why_not(P) == "grace period"
    assert m.evaluate() == []
    m.advance(EPS)
    m.beat(P)
    assert m.leads(P)
    assert [t.kind for t in m.evaluate()] == [EventKind.ACQUIRED]


def test_full_exclusive_reassignment_starts_a_new_grace_period() -> None:
    """Getting a partition back after a revoke restarts the grace period."""
    m = Member(Variant.FULL, Mode.EXCLUSIVE)
    m.lead(P)
    m.revoke(P)
    m.assign(P)
    m.beat(P)
    assert m.why_not(P) == "grace period"


@pytest.mark.parametrize("variant", [Variant.FULL, Variant.FAST])
def test_exclusive_revoke_is_immediate_even_with_release(variant: Variant) -> None:
    """In exclusive mode revoke() ends leadership at once; release=True is ignored."""
    m = Member(variant, Mode.EXCLUSIVE)
    m.lead(P)
    started = m.wall
    assert m.revoke(P, release=True) == [
        Transition(EventKind.REVOKED, P, "rebalance", term_started_wall=started)
    ]
    m.beat(P, incarnation=0)
    assert not m.leads(P)
    assert m.tracker.led_or_assigned() == frozenset()


# -- fast variant -----------------------------------------------------------------------------

MODES = [Mode.NON_EXCLUSIVE, Mode.EXCLUSIVE]


@pytest.mark.parametrize("mode", MODES)
def test_fast_ignores_other_members_heartbeats(mode: Mode) -> None:
    """The fast variant ignores other members' heartbeats, even with a matching incarnation."""
    m = Member(Variant.FAST, mode)
    m.assign(P)
    if mode is Mode.EXCLUSIVE:
        m.advance(T)  # past the grace period, so only the missing own heartbeat stops it
    m.beat(P, member_id=OTHER, incarnation=m.tracker.incarnation(P))
    assert not m.leads(P)
    assert m.why_not(P) == "no heartbeat yet"
    m.beat(P)
    assert m.leads(P)


@pytest.mark.parametrize("mode", MODES)
def test_fast_ignores_own_heartbeats_from_an_earlier_incarnation(mode: Mode) -> None:
    """An own heartbeat sent in an earlier term does not count after a revoke and reassign."""
    m = Member(Variant.FAST, mode)
    m.lead(P)
    old = m.tracker.incarnation(P)
    echo = m.heartbeat(P)  # sent in the old term, still in flight
    m.revoke(P)
    m.advance(STEP)
    m.assign(P)
    assert m.tracker.incarnation(P) != old
    m.observe(P, echo)
    assert not m.leads(P)
    assert m.why_not(P) == "no heartbeat yet"
    if mode is Mode.EXCLUSIVE:
        m.advance(T)  # past the new assignment's grace period: the echo still did not count
        assert m.why_not(P) == "no heartbeat yet"
    m.beat(P)
    assert m.leads(P)


@pytest.mark.parametrize("mode", MODES)
def test_fast_freshness_is_own_send_time(mode: Mode) -> None:
    """Fast freshness is the monotonic time the own heartbeat was sent, not receipt or publish."""
    m = Member(Variant.FAST, mode)
    m.assign(P)
    if mode is Mode.EXCLUSIVE:
        m.advance(T)  # past the grace period
    m.beat(P, age=T)
    assert not m.leads(P)
    assert m.why_not(P) == "own heartbeat not returned"
    m.observe(P, m.heartbeat(P, age=T - EPS), publish_wall=m.wall - 100.0)
    assert m.leads(P)
    m.advance(EPS)
    assert not m.leads(P)


def test_fast_exclusive_grace_period_after_assignment() -> None:
    """Fast exclusive waits T after a new assignment, even with its own fresh heartbeats back.

    A previous owner that lost the coordinator but not the broker still sees its own heartbeats
    return until its session is declared lost, about when the partition is reassigned.
    """
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.assign(P)
    m.beat(P)
    assert not m.leads(P)
    assert m.why_not(P) == "grace period"
    m.advance(T - EPS, beat=P)
    assert not m.leads(P)
    assert m.why_not(P) == "grace period"
    assert m.tracker.freshness(m.mono, m.wall) == {P: 0.0}  # its own heartbeat just came back
    assert m.evaluate() == []
    m.advance(EPS)  # exactly T after the assignment; the last own heartbeat is EPS old
    assert m.leads(P)
    assert [t.kind for t in m.evaluate()] == [EventKind.ACQUIRED]
    m.revoke(P)
    m.assign(P)
    m.beat(P)
    assert m.why_not(P) == "grace period"  # a new assignment (incarnation) waits again


def test_fast_exclusive_grace_ends_once_the_previous_holder_is_silent_for_t_plus_e() -> None:
    """The previous holder's last heartbeat, read before our own returned, sent over T + e ago
    and naming the partition: it no longer leads, so the grace period ends at once."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    e = m.config.clock_skew_ms / 1000
    m.assign(P)
    m.beat(P, member_id=OTHER, incarnation=7, age=T + e + EPS, led=(P,), since=m.wall - 60)
    assert m.why_not(P) == "no heartbeat yet"  # our own has not come back: nothing read yet
    m.beat(P)
    assert m.leads(P), m.why_not(P)
    assert m.tracker.in_grace(m.mono, m.wall) == frozenset()
    assert [t.kind for t in m.evaluate()] == [EventKind.ACQUIRED]


@pytest.mark.parametrize(
    ("age", "led", "why"),
    [
        (T + 0.1, (P,), "sent less than T + e ago"),
        (T + 1.0, (), "did not name the partition (it may not be the holder)"),
    ],
)
def test_fast_exclusive_grace_runs_in_full_without_the_evidence(
    age: float, led: tuple[int, ...], why: str
) -> None:
    """No early end when the previous holder was heard recently, or did not claim it."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.assign(P)
    m.beat(P, member_id=OTHER, incarnation=7, age=age, led=led, since=m.wall - 60)
    m.beat(P)
    assert m.why_not(P) == "grace period", why
    m.advance(T, beat=P)
    assert m.leads(P)


def test_fast_exclusive_grace_needs_the_evidence_before_our_own_heartbeat() -> None:
    """A heartbeat of the previous holder read after our own came back landed after ours: it
    says nothing about what came before, and does not end the grace period either way."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.assign(P)
    m.beat(P)
    m.beat(P, member_id=OTHER, incarnation=7, age=T + 1.0, led=(P,), since=m.wall - 60)
    assert m.why_not(P) == "grace period"


def test_fast_exclusive_a_later_term_of_another_member_ends_ours() -> None:
    """Another member's heartbeat on our partition whose term began after ours: the partition
    was taken from us (we are the zombie); we stop leading it for good."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.lead(P)
    m.beat(P, member_id=OTHER, incarnation=3, led=(), since=m.wall - 0.05)  # ours began T ago
    assert m.why_not(P) == f"taken over by {OTHER}"
    assert [t.kind for t in m.evaluate()] == [EventKind.FENCED]
    m.advance(T, beat=P)  # our own heartbeats keep returning: no resumption
    assert not m.leads(P)
    assert m.evaluate() == []


def test_fast_exclusive_an_earlier_term_of_another_member_does_not_end_ours() -> None:
    """A zombie's heartbeat (its term began before ours) on our partition changes nothing."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.lead(P)
    m.beat(P, member_id=OTHER, incarnation=3, led=(P,), since=m.wall - 60)
    assert m.leads(P)


def test_incarnation_is_per_assignment() -> None:
    """Each new assignment of a partition gets a new incarnation; unassigned has none."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    assert m.tracker.incarnation(P) is None
    m.assign(P)
    first = m.tracker.incarnation(P)
    m.assign(P)
    assert m.tracker.incarnation(P) == first
    m.revoke(P)
    assert m.tracker.incarnation(P) is None
    m.assign(P)
    assert m.tracker.incarnation(P) not in (None, first)


# -- the stall guard --------------------------------------------------------------------------


@pytest.mark.parametrize("variant", [Variant.FULL, Variant.FAST])
def test_exclusive_stall_stops_leadership_until_a_grace_period_passes(variant: Variant) -> None:
    """After a stall an exclusive member does not lead, even when fresh, until S + 0.5 s (here
    more than T) after waking: librdkafka may believe in a lost session for up to S."""
    m = Member(variant, Mode.EXCLUSIVE)
    m.lead(P)
    started = m.wall
    m.tick()
    m.jump(STALL_LIMIT + STEP)
    m.beat(P)  # fresh, but fetched under an assignment that may be gone
    assert not m.leads(P)
    assert m.why_not(P) == "stalled"
    assert m.evaluate() == [Transition(EventKind.FENCED, P, "stalled", term_started_wall=started)]
    assert m.tracker.stalls == 0
    m.tick()
    assert m.tracker.stalls == 1
    assert m.why_not(P) == "recovering from a stall"
    suspect = m.config.session_timeout_ms / 1000 + 0.5
    assert suspect > T
    m.advance(suspect - EPS, beat=P)
    assert not m.leads(P)
    assert m.why_not(P) == "recovering from a stall"
    assert m.evaluate() == []
    m.advance(EPS)
    m.beat(P)
    assert m.leads(P)
    assert m.evaluate() == [Transition(EventKind.RESUMED, P, "heartbeats fresh again")]
    m.jump(STALL_LIMIT + STEP)
    m.tick()
    assert m.tracker.stalls == 2


@pytest.mark.parametrize("variant", [Variant.FULL, Variant.FAST])
def test_exclusive_pause_at_the_stall_limit_is_tolerated(variant: Variant) -> None:
    """A gap of exactly stall_limit_ms between ticks is not a stall."""
    m = Member(variant, Mode.EXCLUSIVE)
    m.lead(P)
    m.jump(STALL_LIMIT)
    assert m.leads(P)
    m.tick()
    assert m.tracker.stalls == 0
    assert m.leads(P)


def test_exclusive_member_does_not_lead_before_its_first_tick() -> None:
    """Until the watchdog has ticked once, an exclusive member cannot vouch for itself."""
    config = make_config(Variant.FAST, Mode.EXCLUSIVE)
    tracker = LeadershipTracker(config, ME)
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    tracker.assign([P], m.mono)
    inc = tracker.incarnation(P)
    m.jump(T)  # past the grace period, with no tick yet
    tracker.observe(P, m.heartbeat(P, incarnation=inc), m.wall, m.mono)
    assert tracker.why_not(P, m.mono, m.wall) == "stalled"
    tracker.tick(m.mono)
    assert tracker.leads(P, m.mono, m.wall)


@pytest.mark.parametrize("variant", [Variant.FULL, Variant.FAST])
def test_nonexclusive_ignores_stalls(variant: Variant) -> None:
    """A non-exclusive member keeps leading across a stall while its heartbeats are fresh."""
    m = Member(variant, Mode.NON_EXCLUSIVE)
    m.lead(P)
    m.jump(1.5)  # three times the default stall limit, S / 2
    m.beat(P)
    assert m.leads(P)
    m.tick()
    assert m.why_not(P) is None
    assert m.evaluate() == []
