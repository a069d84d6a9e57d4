"""The relay's hot standby over a fake reader: high-water marks, clean releases, readiness."""

from __future__ import annotations

import time
from typing import Any

import orjson
from confluent_kafka import Message

from pricing_ha.dedupe.control import (
    HANDOVER,
    KEPT,
    PROBE,
    RELEASE,
    TAKEOVER,
    PartitionView,
    Snapshot,
    control_kind,
)
from pricing_ha.kafka.headers import CONTROL_HEADER
from tests.unit.standby_log import TOKEN, Log, read_to_end, tail_of


def test_marks_are_each_instruments_highest_seq_below_own_marker() -> None:
    log = Log(2)
    log.price(0, "EURUSD", 1)
    log.price(0, "EURUSD", 3)
    log.price(0, "USDJPY", 7, header=False)  # no seq header: read from the value
    log.price(1, "GBPUSD", 9)
    mark = log.control(0, TAKEOVER, f"{TOKEN}:1")
    log.price(0, "EURUSD", 4)  # after the marker: not part of the takeover's marks
    tail = tail_of(log)
    tail.step(0)
    snap = tail.snapshot_at(0, mark, 0)
    assert snap is not None
    assert snap.offset == mark
    assert snap.high == {"EURUSD": 3, "USDJPY": 7}
    assert tail.views[0].high == {"EURUSD": 4, "USDJPY": 7}  # the tail goes on
    assert tail.views[1].high == {"GBPUSD": 9}
    assert [tp.partition for tp in log.assigned] == [0, 1]


def test_a_hand_over_announcement_counts_for_the_latest_term_only() -> None:
    """A successor's marker finds the latest term's owner handing over only if that owner
    announced it for that very term below the marker; a later term (another member's
    takeover) makes an earlier announcement irrelevant."""
    log = Log(2)
    term = log.control(0, TAKEOVER, "r2/xyz:1")
    log.price(0, "EURUSD", 1)
    log.control(0, HANDOVER, "r2/xyz:2", term=term)
    log.price(0, "EURUSD", 2)  # emitted while handing over
    mine = log.control(0, TAKEOVER, f"{TOKEN}:1")
    old = log.control(1, TAKEOVER, "r2/xyz:3")
    log.control(1, HANDOVER, "r2/xyz:4", term=old)
    newer = log.control(1, TAKEOVER, "r3/qqq:1")  # r3 took it: r2's announcement is old news
    mine_1 = log.control(1, TAKEOVER, f"{TOKEN}:2")
    tail = tail_of(log)
    read_to_end(tail, log)
    snap = tail.snapshot_at(0, mine, 0)
    assert snap is not None
    assert snap.handing_over
    assert not snap.clean
    assert snap.high == {"EURUSD": 2}
    snap_1 = tail.snapshot_at(1, mine_1, 0)
    assert snap_1 is not None
    assert snap_1.term == newer
    assert not snap_1.handing_over
    assert not tail.announced(0, term)  # our own takeover began a later term
    assert not tail.announced(1, old)


def test_a_term_that_never_began_hides_nothing_once_its_writer_ends_it() -> None:
    """r3 wrote a takeover marker above r2's term while r2 was handing the partition over, and
    was revoked before it began (an early marker). Its release says it found the partition
    unreleased and names the term below: a successor then finds r2's term the latest again,
    and r2 still handing over (so it waits for r2's output to drain). Without the names, r3's
    term would stay the latest and r2's announcement would not count."""

    def successor_sees(*below: tuple[str, bytes]) -> Snapshot:
        log = Log(1)
        old = log.control(0, TAKEOVER, "r2/xyz:1")
        log.control(0, HANDOVER, "r2/xyz:2", old)
        log.price(0, "EURUSD", 1)
        unbegun = log.control(0, TAKEOVER, "r3/qqq:1")
        log.price(0, "EURUSD", 2)  # r2's, in flight when the marker landed
        log.control(0, RELEASE, "r3/qqq:2", unbegun, ("before", b"unclean"), *below)
        mine = log.control(0, TAKEOVER, f"{TOKEN}:1")
        tail = tail_of(log)
        read_to_end(tail, log)
        snap = tail.snapshot_at(0, mine, 0)
        assert snap is not None
        assert not snap.clean
        assert snap.high == {"EURUSD": 2}
        return snap

    snap = successor_sees(("below", b"0"), ("below_wall", b"1700000000.5"))
    assert (snap.term, snap.term_wall, snap.handing_over) == (0, 1700000000.5, True)
    legacy = successor_sees()
    assert (legacy.term, legacy.handing_over) == (3, False)


def test_the_release_of_a_term_that_never_began_restores_only_the_latest() -> None:
    """Named below a term that is no longer the latest (another member took over since), or
    below a term never owned, the release restores what it should and nothing else."""
    log = Log(1)
    log.control(0, TAKEOVER, "r2/xyz:1")
    unbegun = log.control(0, TAKEOVER, "r3/qqq:1")
    later = log.control(0, TAKEOVER, "r4/www:1")
    log.control(0, RELEASE, "r3/qqq:2", unbegun, ("before", b"unclean"), ("below", b"0"))
    tail = tail_of(log)
    read_to_end(tail, log)
    assert tail.latest_term(0) == later
    fresh = Log(1)
    first = fresh.control(0, TAKEOVER, "r3/qqq:1")
    fresh.control(0, RELEASE, "r3/qqq:2", first, ("before", b"unclean"), ("below", b"-1"))
    tail = tail_of(fresh)
    read_to_end(tail, fresh)
    assert tail.latest_term(0) == -1
    assert tail.views[0].clean  # never owned again


def test_the_owners_tail_sees_its_announcement_only_while_its_term_is_the_latest() -> None:
    log = Log(1)
    term = log.control(0, TAKEOVER, f"{TOKEN}:1")
    tail = tail_of(log)
    read_to_end(tail, log)
    assert not tail.announced(0, term)  # not yet written
    log.control(0, HANDOVER, f"{TOKEN}:2", term=term)
    read_to_end(tail, log)
    assert tail.announced(0, term)
    log.control(0, TAKEOVER, "r2/xyz:1")  # a successor's marker after it
    read_to_end(tail, log)
    assert not tail.announced(0, term)


def test_kept_withdraws_the_announcement_of_its_term_only() -> None:
    """An owner given the partition back while handing it over goes on under its term and
    withdraws its announcement: a successor after a later crash must not wait for a release."""
    log = Log(1)
    term = log.control(0, TAKEOVER, "r2/xyz:1")
    log.control(0, HANDOVER, "r2/xyz:2", term=term)
    log.control(0, KEPT, "r2/xyz:3", term=term + 1000)  # another term's: ignored
    tail = tail_of(log)
    read_to_end(tail, log)
    assert tail.announced(0, term)
    log.control(0, KEPT, "r2/xyz:4", term=term)
    log.price(0, "EURUSD", 5)
    mine = log.control(0, TAKEOVER, f"{TOKEN}:1")
    read_to_end(tail, log)
    snap = tail.snapshot_at(0, mine, 0)
    assert snap is not None
    assert not snap.handing_over
    assert not tail.views[0].handing_over


def test_a_checkpoint_carries_the_hand_over_announcement() -> None:
    view = PartitionView(position=10, term=3, handover_term=3, last_data=5)
    back = PartitionView.decode(view.encode(), 12)
    assert back is not None
    assert back.handover_term == 3
    assert back.handing_over
    older = orjson.loads(view.encode())
    del older["handover_term"]  # written by a relay from before announcements
    back = PartitionView.decode(orjson.dumps(older), 12)
    assert back is not None
    assert back.handover_term == -1
    assert not back.handing_over


def test_a_marker_of_another_member_is_not_captured() -> None:
    log = Log(1)
    log.price(0, "EURUSD", 1)
    theirs = log.control(0, TAKEOVER, "r2/xyz:1")
    tail = tail_of(log)
    tail.step(0)
    assert tail.snapshot_at(0, theirs, 0.2) is None  # passed it: not ours, no wait


def test_snapshot_waits_for_the_tail_and_gives_up_in_time() -> None:
    log = Log(1)
    tail = tail_of(log)
    tail.step(0)
    mark = log.control(0, PROBE, f"{TOKEN}:1")
    assert tail.snapshot_at(0, mark, 0.05) is None  # not read yet
    tail.step(0)
    snap = tail.snapshot_at(0, mark, 0)
    assert snap is not None
    assert snap.clean  # never owned


def test_a_takeover_waits_for_the_old_terms_release_even_after_its_own_marker() -> None:
    log = Log(1)
    old = log.control(0, TAKEOVER, "r2/aaa:1")
    log.price(0, "EURUSD", 1)
    mine = log.control(0, TAKEOVER, f"{TOKEN}:2")  # the old owner is still handing over
    tail = tail_of(log)
    tail.step(0)
    # Not released: a wait for cleanliness alone can never end (the latest term is ours).
    assert not tail.wait_clean({0: mine}, 0.05, terms={0: old})
    log.control(0, RELEASE, "r2/aaa:3", term=old)  # it saw our marker, stopped, released
    tail.step(0)
    assert not tail.wait_clean({0: mine}, 0.05)  # still not "clean"...
    assert tail.wait_clean({0: mine}, 0.05, terms={0: old})  # ...but the old term is over
    # A release of the old term *below* our marker (prices after it) does not count.
    log2 = Log(1)
    old2 = log2.control(0, TAKEOVER, "r2/aaa:1")
    log2.control(0, RELEASE, "r2/aaa:3", term=old2)
    log2.price(0, "EURUSD", 2)
    mine2 = log2.control(0, TAKEOVER, f"{TOKEN}:2")
    tail2 = tail_of(log2)
    tail2.step(0)
    assert not tail2.wait_clean({0: mine2}, 0.05, terms={0: old2})


def test_a_release_above_the_marker_gives_complete_marks_under_that_marker() -> None:
    """The old owner saw our marker, emitted what it had in flight, then released its term:
    the marks read up to the release include those prices, and our marker is the term."""
    log = Log(1)
    old = log.control(0, TAKEOVER, "r2/aaa:1")
    log.price(0, "EURUSD", 1)
    mine = log.control(0, TAKEOVER, f"{TOKEN}:2")
    log.price(0, "EURUSD", 2)  # in flight when it saw our marker
    tail = tail_of(log)
    read_to_end(tail, log)
    mark = tail.snapshot_at(0, mine, 0)
    assert mark is not None
    assert (mark.term, mark.high) == (old, {"EURUSD": 1})
    assert tail.released_above(0, mark) is None  # not released yet
    log.control(0, RELEASE, "r2/aaa:3", term=old)
    log.control(0, PROBE, f"{TOKEN}:3")  # our own request after the marker changes nothing
    read_to_end(tail, log)
    snap = tail.released_above(0, mark)
    assert snap is not None
    assert (snap.offset, snap.term, snap.high, snap.clean) == (mine, old, {"EURUSD": 2}, True)


def test_a_release_above_the_marker_does_not_count_after_anything_else() -> None:
    """A price after the release, another member's request or term after our marker, or a
    late release of an earlier term: mark the end again instead."""

    def released_above(*after: tuple[str, str]) -> bool:
        log = Log(1)
        earlier = log.control(0, TAKEOVER, "r1/zzz:1")
        old = log.control(0, TAKEOVER, "r2/aaa:1")
        mine = log.control(0, TAKEOVER, f"{TOKEN}:2")
        for kind, who in after:
            if kind == "price":
                log.price(0, "EURUSD", 5)
            elif kind == "release":
                log.control(0, RELEASE, "r2/aaa:3", term=old if who == "old" else earlier)
            else:
                log.control(0, PROBE if kind == "probe" else TAKEOVER, f"{who}:9")
        tail = tail_of(log)
        read_to_end(tail, log)
        mark = tail.snapshot_at(0, mine, 0)
        assert mark is not None
        return tail.released_above(0, mark) is not None

    assert released_above(("release", "old"))
    assert not released_above(("release", "old"), ("price", ""))
    assert not released_above(("probe", "r3/ccc"), ("release", "old"))
    assert not released_above(("release", "old"), ("takeover", "r3/ccc"))
    assert not released_above(("release", "other"))


def test_a_marker_above_a_clean_release_stands_until_anything_follows_it() -> None:
    """An early takeover marker (written in the grace period) above a partition released
    cleanly: the marks below it are complete as long as nothing but the marker follows (no
    price, no other member's request or term)."""

    def start_from(*after: str) -> Snapshot | None:
        log = Log(1)
        old = log.control(0, TAKEOVER, "r2/aaa:1")
        log.price(0, "EURUSD", 4)
        log.control(0, RELEASE, "r2/aaa:2", term=old)
        mine = log.control(0, TAKEOVER, f"{TOKEN}:3")
        for what in after:
            if what == "price":
                log.price(0, "EURUSD", 5)
            elif what == "own probe":
                log.control(0, PROBE, f"{TOKEN}:4")
            else:
                log.control(0, PROBE if what == "probe" else TAKEOVER, "r3/ccc:9")
        tail = tail_of(log)
        read_to_end(tail, log)
        mark = tail.snapshot_at(0, mine, 0)
        assert mark is not None
        assert mark.clean
        return tail.released_above(0, mark)

    snap = start_from()
    assert snap is not None
    assert (snap.clean, snap.high) == (True, {"EURUSD": 4})
    assert start_from("own probe") is not None
    assert start_from("price") is None
    assert start_from("probe") is None
    assert start_from("takeover") is None


def test_a_wait_for_a_release_gives_up_when_asked() -> None:
    log = Log(1)
    log.control(0, TAKEOVER, "r2/aaa:1")
    mine = log.control(0, TAKEOVER, f"{TOKEN}:2")
    tail = tail_of(log)
    tail.step(0)
    started = time.monotonic()
    assert not tail.wait_clean({0: mine}, 5.0, give_up=lambda: True)
    assert time.monotonic() - started < 1.0


def clean_before(build: list[tuple[str, Any]]) -> bool:
    """Whether a probe appended after ``build`` (a list of ops) finds the partition clean."""
    log = Log(1)
    terms: list[int] = []
    for op, arg in build:
        if op == "takeover":
            terms.append(log.control(0, TAKEOVER, f"{arg}:1"))
        elif op == "price":
            log.price(0, "EURUSD", arg)
        elif op == "release":  # arg: which term (index into terms) it names
            log.control(0, RELEASE, "other:2", term=terms[arg])
    probe = log.control(0, PROBE, f"{TOKEN}:9")
    tail = tail_of(log)
    tail.step(0)
    snap = tail.snapshot_at(0, probe, 0)
    assert snap is not None
    return snap.clean


def test_clean_release_needs_the_latest_terms_owner_to_release_last() -> None:
    a, b = "r2/aaa", "r3/bbb"
    assert clean_before([])
    assert clean_before([("takeover", a), ("price", 1), ("release", 0)])
    assert not clean_before([("takeover", a), ("price", 1)])  # crashed owner: no release
    assert not clean_before([("price", 1)])  # data without any term: unknown owner
    # b took over after a; a's late release does not speak for b, who may still emit.
    assert not clean_before([("takeover", a), ("takeover", b), ("price", 2), ("release", 0)])
    assert clean_before([("takeover", a), ("release", 0), ("takeover", b), ("release", 1)])
    # A price after the release: someone is emitting without a term.
    assert not clean_before([("takeover", a), ("release", 0), ("price", 3)])


def test_a_late_release_of_an_earlier_term_leaves_a_released_partition_released() -> None:
    a, b = "r2/aaa", "r3/bbb"
    # a, deposed, notices only after b released its own term: still released (b was last).
    assert clean_before(
        [("takeover", a), ("takeover", b), ("price", 2), ("release", 1), ("release", 0)]
    )
    # ... but not once a price follows (someone emits without a term).
    assert not clean_before(
        [("takeover", a), ("takeover", b), ("release", 1), ("release", 0), ("price", 3)]
    )
    # Before b released, a's release changes nothing: b may still emit.
    assert not clean_before([("takeover", a), ("takeover", b), ("release", 0)])


def test_readiness_waits_for_every_partition_to_reach_its_end() -> None:
    log = Log(2)
    log.price(0, "EURUSD", 1)
    tail = tail_of(log)
    problem = tail.problem()
    assert problem is not None
    assert "[0, 1]" in problem
    tail.step(0)
    assert tail.problem() is None
    assert tail.records == 1


def test_records_read_twice_are_applied_once() -> None:
    log = Log(1)
    log.price(0, "EURUSD", 5)
    tail = tail_of(log)
    tail.step(0)
    log.served[0] = 0  # as after a reset to an earlier offset
    log.price(0, "EURUSD", 6)
    tail.step(0)
    assert tail.records == 2
    assert tail.views[0].position == 2
    assert tail.views[0].high == {"EURUSD": 6}


def test_control_kind_tells_control_records_from_prices() -> None:
    assert control_kind(b"EURUSD", [("seq", b"1")]) is None
    assert control_kind(None, None) is None
    got = control_kind(None, [(CONTROL_HEADER, "release"), ("term", b"12")])
    assert got == (RELEASE, {CONTROL_HEADER: b"release", "term": b"12"})


def test_a_request_is_seen_only_by_a_tail_fresh_by_its_end_or_by_own_records() -> None:
    log = Log(1)
    term = log.control(0, TAKEOVER, TOKEN + ":1")
    log.price(0, "EURUSD", 1)
    tail = tail_of(log)
    tail.step(0)  # reads to the end: fresh by the end-of-partition event
    assert tail.unrequested_within(0, term, 1.0)
    tail.views[0].end_mono -= 5.0  # the last end reached long ago (data kept flowing)
    assert not tail.unrequested_within(0, term, 1.0)
    # Own record produced just now landed below the tail's position: fresh again.
    position = tail.views[0].position
    assert tail.unrequested_within(0, term, 1.0, lambda _p, pos: time.monotonic() - 0.1)
    assert not tail.unrequested_within(0, term, 1.0, lambda _p, pos: float("-inf"))
    # A successor's probe after the term: requested, however fresh the tail.
    log.control(0, PROBE, "r9/zzz:1")
    tail.step(0)
    assert tail.views[0].position == position + 1
    assert not tail.unrequested_within(0, term, 1.0, lambda _p, pos: time.monotonic())


def test_read_as_of_is_the_production_time_of_the_latest_own_record_below_a_position() -> None:
    from pricing_ha.dedupe.output_producers import OutputProducers

    out = OutputProducers.__new__(OutputProducers)
    out._appended = {}
    now = time.monotonic()
    for offset, latency in ((10, 0.5), (20, 0.2), (30, 0.05)):
        msg = Message(topic="prices", partition=3, offset=offset, latency=latency)
        out._note_appended(msg)
    assert out.read_as_of(3, 5) == float("-inf")  # nothing of ours below offset 5
    assert out.read_as_of(2, 100) == float("-inf")  # nothing produced to that partition
    below_25 = out.read_as_of(3, 25)
    assert now - 0.3 < below_25 < now  # the record at 20, produced 0.2 s before its ack
    assert out.read_as_of(3, 31) > below_25  # the record at 30 is newer


def test_requested_after_sees_probes_and_takeovers_after_a_term_only() -> None:
    log = Log(2)
    term = log.control(0, TAKEOVER, TOKEN + ":1")
    log.price(0, "EURUSD", 1)
    tail = tail_of(log)
    tail.step(0)
    assert not tail.requested_after(0, term)
    log.control(1, PROBE, "r9/zzz:1")  # another partition's request
    tail.step(0)
    assert not tail.requested_after(0, term)
    log.control(0, PROBE, "r9/zzz:1")
    assert not tail.requested_after(0, term)  # appended, not read yet
    tail.step(0)
    assert tail.requested_after(0, term)
    tail.views[0].end_mono -= 5.0  # staleness does not matter: it was asked
    assert tail.requested_after(0, term)


# -- checkpoints ------------------------------------------------------------------------------
