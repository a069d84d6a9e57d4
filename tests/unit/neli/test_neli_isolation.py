"""Non-exclusive NELI riding through isolation (``keep_leading_when_isolated``), and the
settings NeliConfig reserves for its timing argument."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from neli import EventKind, Mode, NeliConfig, NeliConfigError, Variant
from neli._tracker import LeadershipTracker
from tests.unit.neli.neli_tracker_harness import EPS, ME, Member, T, make_config

P = 3
Q = 5
#: The group member that leads P in the rival tests (the harness's qualifying full-NELI beats
#: come from another member, whose heartbeats name nothing as led).
RIVAL = "rival/000000000003"

NON_EXCLUSIVE = [
    pytest.param(Variant.FULL, id="full"),
    pytest.param(Variant.FAST, id="fast"),
]


def holding_member(variant: Variant, *, hold: bool = True) -> Member:
    """A non-exclusive member whose tracker has ``keep_leading_when_isolated=hold``."""
    m = Member(variant, Mode.NON_EXCLUSIVE)
    m.config = dataclasses.replace(m.config, keep_leading_when_isolated=hold)
    m.tracker = LeadershipTracker(m.config, ME)
    m.tracker.tick(m.mono)
    return m


def rival_beats(m: Member, led: tuple[int, ...], seconds: float) -> Iterator[float]:
    """Every 0.25 s for ``seconds`` (and one more step when ``seconds`` is a whole number of
    steps): a heartbeat of this member's own comes back on Q, and the rival's arrives there
    naming ``led``; yields the time elapsed after each, for checks in between."""
    elapsed = 0.0
    while elapsed <= seconds:
        m.advance(0.25, beat=Q)
        m.observe(Q, m.heartbeat(Q, member_id=RIVAL, led=led))
        elapsed += 0.25
        yield elapsed


def rival_claims(m: Member, led: tuple[int, ...], seconds: float) -> None:
    """:func:`rival_beats` through to the end, with no checks in between."""
    for _ in rival_beats(m, led, seconds):
        pass


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_stale_while_assigned_keeps_leading_provisionally(variant: Variant) -> None:
    """A leader whose heartbeats stop returning keeps leading (provisionally), with no event."""
    m = holding_member(variant)
    m.lead(P)
    m.advance(4 * T)  # the broker answers nothing: no heartbeat comes back
    assert m.leads(P)
    assert m.evaluate() == []
    assert m.tracker.provisional(m.mono, m.wall) == {P}
    m.beat(P)  # the broker is back
    assert m.tracker.provisional(m.mono, m.wall) == frozenset()
    assert m.evaluate() == []


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_without_the_setting_stale_means_fenced(variant: Variant) -> None:
    """The paper's rule is the default: stale observations end leadership after T."""
    m = holding_member(variant, hold=False)
    m.lead(P)
    m.advance(T + EPS)
    assert not m.leads(P)
    assert [t.kind for t in m.evaluate()] == [EventKind.FENCED]


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_session_loss_holds_until_a_new_assignment(variant: Variant) -> None:
    """After a session loss the member leads until reassigned; a partition not given back is
    then led until its new owner is seen leading it."""
    m = holding_member(variant)
    m.lead(P)
    assert m.tracker.revoke([P], "session lost", release=True, lost=True) == []
    m.advance(5 * T)
    assert m.leads(P)
    assert m.evaluate() == []
    m.lead(Q)  # the rejoin gave this member another partition; P went elsewhere
    m.advance(0.5, beat=Q)
    assert m.leads(P), "no gap before the new owner is seen"
    m.observe(Q, m.heartbeat(Q, member_id=RIVAL, led=(P,)))  # the new owner names P as led
    assert not m.leads(P)
    assert "handed over" in (m.why_not(P) or "")
    revoked = [t for t in m.evaluate() if t.partition == P]
    assert [t.kind for t in revoked] == [EventKind.REVOKED]


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_hand_over_after_a_session_loss_ends_within_t(variant: Variant) -> None:
    """With no sign of the new owner, the handed-over partition is released T after the
    assignment."""
    m = holding_member(variant)
    m.lead(P)
    m.tracker.revoke([P], "session lost", release=True, lost=True)
    m.advance(3 * T)
    m.assign(Q)
    m.advance(T - 0.25)
    assert m.leads(P)
    m.advance(0.25)
    assert not m.leads(P)
    assert [t.kind for t in m.evaluate() if t.partition == P] == [EventKind.REVOKED]


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_a_handed_over_partition_nobody_leads_stays_led_while_heartbeats_arrive(
    variant: Variant,
) -> None:
    """The new assignment left P with nobody (a cooperative rebalance can take more than one
    round): while this member reads heartbeats and none names P as led, it keeps leading P;
    the first claim by another member ends that, and so does losing sight of the heartbeats."""
    m = holding_member(variant)
    m.lead(P)
    m.tracker.revoke([P], "session lost", release=True, lost=True)
    m.advance(T / 2)
    m.lead(Q)  # P is not in the new assignment
    for elapsed in rival_beats(m, (), 3 * T):  # another member's heartbeats name no P
        assert m.leads(P), (elapsed, m.why_not(P))
    assert m.evaluate() == []
    m.advance(T - 0.25)  # nothing read for almost T: still led
    assert m.leads(P)
    m.advance(0.25)  # nothing read for T: the member cannot tell, and lets go
    assert not m.leads(P)
    assert [t.kind for t in m.evaluate() if t.partition == P] == [EventKind.REVOKED]


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_a_handed_over_partition_goes_at_the_first_claim_of_another_member(
    variant: Variant,
) -> None:
    """Long after the assignment, the first heartbeat of another member that names P ends
    this member's leadership of P."""
    m = holding_member(variant)
    m.lead(P)
    m.tracker.revoke([P], "session lost", release=True, lost=True)
    m.lead(Q)
    m.advance(2 * T, beat=Q)
    assert m.leads(P)
    m.observe(Q, m.heartbeat(Q, member_id=RIVAL, led=(P,)))
    assert "handed over" in (m.why_not(P) or "")


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_the_predecessors_claims_before_its_hand_over_do_not_end_provisional_leadership(
    variant: Variant,
) -> None:
    """The rival led P for over T and handed it to this member; the broker stalled before its
    heartbeat that no longer names P was read (a pulse is 1 s). Its claims made during this
    member's term last only until the hand-over: they must not make this member give P up in
    the stall (seen in the broker-stall test: P had no leader in its group for 6 s)."""
    m = holding_member(variant)
    m.lead(Q)
    rival_claims(m, (P,), T)  # the rival leads P for over T
    m.lead(P)  # P is handed to this member; the rival names it for 0.75 s more
    for _ in range(3):
        m.advance(0.25, beat=Q)
        m.observe(Q, m.heartbeat(Q, member_id=RIVAL, led=(P,)))
    m.tracker.revoke([P, Q], "session lost", release=True, lost=True)  # the broker stalls
    m.advance(T / 2)
    assert m.leads(P), m.why_not(P)
    assert m.leads(Q), m.why_not(Q)
    # A rival that goes on naming P during this member's term for over T is a real one.
    m.tracker.revoke([P], "session lost", release=True, lost=True)
    rival_claims(m, (P,), T)
    assert "has led it for over T" in (m.why_not(P) or "")


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_session_loss_then_same_partition_back_is_one_term(variant: Variant) -> None:
    """Reassigned the partition it held, the member goes on leading: no event at all."""
    m = holding_member(variant)
    m.lead(P)
    m.tracker.revoke([P], "session lost", release=True, lost=True)
    m.advance(3 * T)
    m.assign(P)
    assert m.leads(P)
    m.advance(T / 2, beat=P)
    assert m.leads(P)
    assert m.evaluate() == []
    assert m.tracker.assigned() == {P}


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_another_leader_for_longer_than_t_ends_provisional_leadership(variant: Variant) -> None:
    """Seeing another group member lead the partition for over T makes the member step down."""
    m = holding_member(variant)
    m.lead(P)
    m.lead(Q)
    m.tracker.revoke([P], "session lost", release=True, lost=True)
    # the rival's heartbeats reach us on Q, naming P as led by it
    for elapsed in rival_beats(m, (P,), T):
        if elapsed < T:
            assert m.leads(P), elapsed
    assert not m.leads(P)
    assert "has led it for over T" in (m.why_not(P) or "")
    assert [t.kind for t in m.evaluate() if t.partition == P] == [EventKind.REVOKED]


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_a_claim_the_rival_has_dropped_does_not_end_provisional_leadership(
    variant: Variant,
) -> None:
    """The rival led P for over T, then handed it to this member: its old claim, though less
    than T old, must not make this member give P up when the next session loss comes (seen in
    the broker-stall test: both members of a group dropped their partitions on each other's
    old claims, and the group led half of them through the stall)."""
    m = holding_member(variant)
    m.lead(Q)
    rival_claims(m, (P,), T)  # the rival leads P for over T
    m.lead(P)  # P is handed to this member; the rival's next heartbeat no longer names it
    m.observe(Q, m.heartbeat(Q, member_id=RIVAL, led=()))
    m.advance(0.25, beat=Q)
    m.tracker.revoke([P, Q], "session lost", release=True, lost=True)
    m.advance(T / 2)
    assert m.leads(P), m.why_not(P)
    assert m.leads(Q), m.why_not(Q)


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_an_older_copy_of_a_heartbeat_does_not_end_the_claim(variant: Variant) -> None:
    """Copies of one heartbeat arrive on several partitions in any order: a copy older than
    the claim's latest heartbeat leaves the claim in place."""
    m = holding_member(variant)
    m.lead(P)
    m.lead(Q)
    old = m.heartbeat(Q, member_id=RIVAL, led=())
    m.tracker.revoke([P], "session lost", release=True, lost=True)
    rival_claims(m, (P,), T)
    m.observe(Q, old)  # sent before the claims above, read after them
    assert not m.leads(P)
    assert "has led it for over T" in (m.why_not(P) or "")


@pytest.mark.parametrize("variant", NON_EXCLUSIVE)
def test_planned_revocation_is_released_as_usual(variant: Variant) -> None:
    """A rebalance (not a session loss) releases the partition T after the last observation."""
    m = holding_member(variant)
    m.lead(P)
    m.revoke(P, release=True)
    m.advance(T + EPS)
    assert not m.leads(P)
    assert [t.kind for t in m.evaluate()] == [EventKind.REVOKED]


def test_never_led_partition_is_not_held() -> None:
    """Only partitions that were led are held: a new assignment with no heartbeat is not led."""
    m = holding_member(Variant.FULL)
    m.assign(P)
    m.advance(3 * T)
    assert not m.leads(P)


def test_exclusive_mode_refuses_the_setting() -> None:
    """keep_leading_when_isolated with exclusive mode is a config error naming the field."""
    base = make_config(Variant.FAST, Mode.EXCLUSIVE)
    with pytest.raises(NeliConfigError, match="keep_leading_when_isolated"):
        dataclasses.replace(base, keep_leading_when_isolated=True)


@pytest.mark.parametrize(
    "key",
    [
        "heartbeat.interval.ms",
        "partition.assignment.strategy",
        "max.poll.interval.ms",
        "session.timeout.ms",
        "group.instance.id",
    ],
)
@pytest.mark.parametrize("section", ["kafka", "consumer"])
def test_timing_settings_are_reserved(key: str, section: str) -> None:
    """librdkafka settings the T/S argument rests on cannot be overridden by a passthrough."""
    with pytest.raises(NeliConfigError, match=key.replace(".", r"\.")):
        NeliConfig(
            bootstrap_servers="b:9092",
            group_id="g",
            topic="t",
            **{section: {key: "1"}},  # type: ignore[arg-type]
        )
