"""The relay's hot standby over a fake reader: high-water marks, clean releases, readiness."""

from __future__ import annotations

import time
from typing import Any

import orjson
from confluent_kafka import Message

from pricing_ha.dedupe.control import (
    PROBE,
    RELEASE,
    TAKEOVER,
    PartitionView,
    Snapshot,
    control_kind,
    control_of,
)
from pricing_ha.kafka.headers import CONTROL_HEADER
from tests.unit.dedupe.standby_log import TOKEN, Log, read_to_end, tail_of


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


def test_a_term_that_never_began_hides_nothing_once_its_writer_ends_it() -> None:
    """r3 wrote a takeover marker above r2's term and was no longer led when its takeover was
    ready. Its release says it found the partition unreleased and names the term below: a
    successor then finds r2's term the latest again (with its marker's timestamp). Without the
    names, r3's term stays the latest."""

    def successor_sees(*below: tuple[str, bytes]) -> Snapshot:
        log = Log(1)
        log.control(0, TAKEOVER, "r2/xyz:1")
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
    assert (snap.term, snap.term_wall) == (0, 1700000000.5)
    legacy = successor_sees()
    assert legacy.term == 2


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
    assert tail.views[0].term == later
    fresh = Log(1)
    first = fresh.control(0, TAKEOVER, "r3/qqq:1")
    fresh.control(0, RELEASE, "r3/qqq:2", first, ("before", b"unclean"), ("below", b"-1"))
    tail = tail_of(fresh)
    read_to_end(tail, fresh)
    assert tail.views[0].term == -1
    assert tail.views[0].clean  # never owned again


def test_a_checkpoint_with_a_hand_over_announcement_still_decodes() -> None:
    """A checkpoint written by an earlier relay (it carries ``handover_term``) decodes to the
    same view as one without it: the field is read past."""
    view = PartitionView(position=10, term=3, released_term=3, released_at=6, last_data=5)
    older = orjson.loads(view.encode())
    older["handover_term"] = 3
    back = PartitionView.decode(orjson.dumps(older), 12)
    assert back == view


def test_control_records_of_kinds_no_longer_written_change_nothing() -> None:
    """``handover`` and ``kept`` records (on topics written by earlier relays) are read past:
    the view, and so a checkpoint of it, is the one the other records give."""

    def view_of(*old_kinds: bytes) -> PartitionView:
        log = Log(1)
        term = log.control(0, TAKEOVER, "r2/xyz:1")
        log.price(0, "EURUSD", 1)
        log.control(0, RELEASE, "r2/xyz:2", term=term)
        for n, kind in enumerate(old_kinds):  # after everything else: the offsets stay
            log.control(0, kind, f"r2/xyz:{n + 3}", term=term)
        tail = tail_of(log)
        read_to_end(tail, log)
        assert tail.error is None
        view = tail.views[0]
        view.position, view.end_mono = 0, 0.0  # where and when it was read: not the fold
        return view

    plain = view_of()
    assert plain.clean
    assert view_of(b"handover") == plain
    assert view_of(b"handover", b"kept") == plain
    assert view_of(b"handover").encode() == plain.encode()


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


def test_control_of_a_record_as_read_applies_the_same_rule() -> None:
    """A keyed record is a price even with the control header; an unkeyed one is read."""
    forged: list[tuple[str, str | bytes | None]] = [(CONTROL_HEADER, RELEASE)]
    assert control_of(Message(topic="prices", key=b"EURUSD", headers=forged)) is None
    assert control_of(Message(topic="prices", key=None, headers=None)) is None
    got = control_of(Message(topic="prices", key=None, headers=[*forged, ("term", b"12")]))
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
