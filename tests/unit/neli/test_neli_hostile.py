"""Hostile records on the NELI topic (issue 45): refused and counted, never raised, never
allowed to depose or suppress a member that leads."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from neli import EventKind, Mode, Variant
from neli._heartbeat_check import MAX_HEARTBEAT_BYTES
from neli._heartbeat_sender import HeartbeatSender
from neli._poller import Poller
from neli._rejections import WARN_INTERVAL_S, Rejections
from neli.testing import ManualClock
from neli.wire import OwnerDirectory
from tests.unit.neli.neli_tracker_harness import GROUP, ME, OTHER, Member, T

P = 1
M = 4
FAKE = "nobody/ffffffffffff"


class FakeMessage:
    """Just what the poller reads of a consumed record."""

    def __init__(self, value: bytes, partition: int, timestamp_s: float, offset: int) -> None:
        """A record at ``offset`` of ``partition``, timestamped ``timestamp_s``."""
        self._value, self._partition = value, partition
        self._ts_ms, self._offset = int(timestamp_s * 1000), offset

    def value(self) -> bytes:
        """The record's value."""
        return self._value

    def partition(self) -> int:
        """The record's partition."""
        return self._partition

    def timestamp(self) -> tuple[int, int]:
        """CreateTime, in ms."""
        return TIMESTAMP_CREATE_TIME, self._ts_ms

    def topic(self) -> str:
        """The NELI topic."""
        return "neli"

    def offset(self) -> int:
        """The record's offset."""
        return self._offset

    def error(self) -> None:
        """No error."""


class FakeConsumer:
    """Hands out queued records, then stops the poller once they are all read."""

    def __init__(self) -> None:
        """Nothing queued."""
        self.queue: list[FakeMessage] = []
        self.poller: Poller | None = None
        self.stored: list[Any] = []

    def poll(self, _timeout: float) -> FakeMessage | None:
        """The next queued record; once none is left, stop the poller."""
        if self.queue:
            return self.queue.pop(0)
        assert self.poller is not None
        self.poller.stop()
        return None

    def store_offsets(self, offsets: list[Any]) -> None:
        """Remember the offsets stored."""
        self.stored.extend(offsets)

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop the poller can schedule on (never run: no revocation here)."""
    new = asyncio.new_event_loop()
    yield new
    new.close()


def _poller(
    member: Member,
    consumer: FakeConsumer,
    failures: list[BaseException],
    loop: asyncio.AbstractEventLoop,
) -> Poller:
    poller = Poller(
        config=member.config,
        member_id=ME,
        tracker=member.tracker,
        lock=threading.Lock(),
        clock=member.clock,
        consumer=consumer,  # type: ignore[arg-type]
        loop=loop,
        events=None,  # type: ignore[arg-type]  # no revocation in these tests
        pulse=lambda: None,
        on_failure=failures.append,
        partitions=M,
        rejections=Rejections(GROUP, member.clock.monotonic),
    )
    consumer.poller = poller
    return poller


def _forged(member: Member, **changes: Any) -> bytes:
    """A heartbeat of a member of our group that does not exist, with ``changes`` to its JSON."""
    doc = json.loads(member.heartbeat(P, member_id=FAKE, led=(P,)).encode())
    doc.update(changes)
    return json.dumps(doc).encode()


def test_poller_survives_hostile_records_counts_them_and_goes_on_leading(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Issue 45's records (``"i": 1e400``, deep nesting) and others are refused and counted by
    reason; the poll thread ends only when told, and the member still leads on its own later
    heartbeat (before the fix the first record raised OverflowError out of the thread)."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.lead(P)
    now = m.wall
    own = dataclasses.replace(m.heartbeat(P), sent_mono=m.mono)
    hostile = [
        _forged(m, i=7).replace(b'"i": 7', b'"i": 1e400'),
        b'{"v":1,"x":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b"\xff\xfe garbage",
        _forged(m, s=now + 3600),  # a term that "begins" in an hour: would depose us
        _forged(m, sw=now + 3600),
        _forged(m, l=[P, M]),  # a partition the topic does not have
        dataclasses.replace(own, sent_mono=m.mono + 3600).encode(),  # "ours", from the future
    ]
    consumer = FakeConsumer()
    consumer.queue = [FakeMessage(v, P, now, i) for i, v in enumerate(hostile)]
    consumer.queue.append(FakeMessage(_forged(m), P, now + 3600, 98))  # future record time
    consumer.queue.append(FakeMessage(own.encode(), P, now, 99))
    failures: list[BaseException] = []
    poller = _poller(m, consumer, failures, loop)
    poller._run()
    assert failures == []
    assert poller._rejections.total == len(hostile) + 1
    assert dict(poller._rejections.by_reason()) == {
        "bad field i": 1,
        "too deep": 1,
        "not json": 1,
        "future s": 1,
        "future sw": 1,
        "bad field l": 1,
        "own from the future": 1,
        "future timestamp": 1,
    }
    assert m.why_not(P) is None
    assert [o.offset for o in consumer.stored] == [99]  # only our own genuine heartbeat


def test_a_plausible_forged_take_over_is_disproved_by_the_group_and_leading_resumes() -> None:
    """A well-formed take-over naming a member that does not exist fences the owner at once
    (a true one must), but one still assigned at a poll begun 2 S + 1 s after reading it leads
    again: before the fix it stopped leading for good."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.lead(P)
    m.beat(P, member_id=FAKE, incarnation=1, led=(P,), since=m.wall - 0.5)
    assert m.why_not(P) == f"taken over by {FAKE}"
    assert [t.kind for t in m.evaluate()] == [EventKind.FENCED]
    read = m.mono
    lift = m.tracker.disprove_after_s
    assert lift == 2 * m.config.session_timeout_ms / 1000 + 1.0
    m.advance(lift, beat=P)
    assert m.tracker.polled(read + lift - 0.25) == []  # a poll begun too early proves nothing
    assert not m.leads(P)
    assert m.tracker.polled(read + lift) == [(P, FAKE)]
    assert m.leads(P)
    assert [t.kind for t in m.evaluate()] == [EventKind.RESUMED]


def test_a_true_take_over_is_revoked_before_it_could_be_disproved() -> None:
    """The group's revocation of a partition taken over removes it: nothing is resumed."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.lead(P)
    m.beat(P, member_id=OTHER, incarnation=1, led=(P,), since=m.wall - 0.5)
    read = m.mono
    m.revoke(P, reason="session lost")
    assert m.tracker.polled(read + 60) == []
    assert not m.leads(P)


def test_a_heartbeat_in_our_name_from_our_future_cannot_keep_us_fresh() -> None:
    """A heartbeat naming this member with a send time later than its own clock is refused:
    it would keep a partition whose real heartbeats no longer return fresh for ever."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.lead(P)
    forged = dataclasses.replace(m.heartbeat(P), sent_mono=m.mono + 3600)
    assert m.tracker.observe(P, forged, forged.sent_wall, m.mono) == "own from the future"
    m.advance(T)
    assert m.why_not(P) == "own heartbeat not returned"


def test_refusals_warn_once_per_interval_and_count_every_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A flood of refused records logs one warning per interval, naming how many it covers."""
    clock = ManualClock()
    rejections = Rejections(GROUP, clock.monotonic)
    with caplog.at_level(logging.WARNING, logger="neli"):
        for _ in range(1000):
            rejections.refuse("not json", "neli[0]@1", "garbage")
            clock.advance(0.001)
        assert len(caplog.records) == 1
        clock.advance(WARN_INTERVAL_S)
        rejections.refuse("too deep", "neli[0]@2", "nested")
    assert len(caplog.records) == 2
    assert "refused 1000 heartbeat(s)" in caplog.records[1].getMessage()
    assert rejections.total == 1001
    assert dict(rejections.by_reason()) == {"not json": 1000, "too deep": 1}


def test_heartbeat_of_another_group_with_a_later_term_changes_nothing() -> None:
    """Only members of this member's group can take its partitions over."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.lead(P)
    m.beat(P, member_id=FAKE, group="elsewhere", incarnation=1, led=(P,), since=m.wall - 0.5)
    assert m.leads(P)


def test_owner_directory_forgets_claims_nobody_renews() -> None:
    """Heartbeats naming ever new members (anyone can write them) do not pile up: a prune at
    ``now`` keeps only claims renewed within ``max_age_s``."""
    directory = OwnerDirectory(partitions=M, max_age_s=1.0)
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    for i in range(1000):
        directory.observe(m.heartbeat(P, member_id=f"fake-{i}", led=(P,), age=5.0))
    directory.observe(m.heartbeat(P, member_id=OTHER, led=(P,)))
    directory.prune(m.wall)
    assert [o.member_id for o in directory.partition_owners(GROUP, P, m.wall)] == [OTHER]
    assert sum(len(c) for c in directory._claims.values()) == 1


def test_a_heartbeat_in_our_name_that_we_never_sent_cannot_keep_us_fresh() -> None:
    """Fast variant: own heartbeats count only if this member sent them (counter and send
    time); a forgery with a plausible send time, copied from our earlier ones, is refused."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.tracker.verify_own = True
    m.assign(P)

    def send_and_read() -> None:
        hb = m.heartbeat(P)
        m.tracker.sent(P, hb.counter, hb.sent_mono)
        assert m.tracker.observe(P, hb, hb.sent_wall, m.mono) is None

    for _ in range(int(T / 0.25)):  # the grace period, with our heartbeats returning
        m.clock.advance(0.25)
        m.tick()
        send_and_read()
    assert m.leads(P)
    genuine = m.heartbeat(P)
    m.tracker.sent(P, genuine.counter, genuine.sent_mono)  # sent, but it never returns
    m.advance(T - 0.25)
    for forged in (
        dataclasses.replace(genuine, sent_mono=m.mono),  # our counter, a later send time
        dataclasses.replace(genuine, counter=genuine.counter + 1, sent_mono=m.mono),
    ):
        assert m.tracker.observe(P, forged, forged.sent_wall, m.mono) == "own, never sent"
    m.advance(0.25)
    assert m.why_not(P) == "own heartbeat not returned"
    assert len(m.tracker._slots[P].sent) <= T / 0.25 + 1  # old sends are forgotten


class FakeProducer:
    """Records what is produced."""

    def __init__(self) -> None:
        """Nothing produced yet."""
        self.values: list[bytes] = []

    def produce(self, _topic: str, *, value: bytes, **_kw: Any) -> None:
        """Record the value."""
        self.values.append(value)

    def poll(self, _timeout: float) -> int:
        """No delivery reports."""
        return 0


def test_a_member_whose_heartbeats_exceed_the_cap_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sender whose heartbeat every reader would refuse as too large logs one error, not one
    per pulse, and still sends (the readers count the refusals)."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.assign(P)
    producer = FakeProducer()
    sender = HeartbeatSender(
        config=m.config,
        member_id=ME,
        tracker=m.tracker,
        lock=threading.Lock(),
        clock=m.clock,
        producer=producer,  # type: ignore[arg-type]
        partitions=M,
        meta=[lambda: {f"k{i}": "v" * 1000 for i in range(300)}],
    )
    with caplog.at_level(logging.ERROR, logger="neli"):
        sender.pulse()
        sender.pulse()
    assert len(producer.values) == 2
    assert len(producer.values[0]) > MAX_HEARTBEAT_BYTES
    assert [r.getMessage().split(" bytes")[0] for r in caplog.records] == [
        f"neli heartbeat of {len(producer.values[0])}"
    ]


def test_an_own_heartbeat_returning_after_its_send_was_forgotten_is_ignored_not_refused() -> None:
    """A genuine heartbeat that comes back more than T after it was sent (its send forgotten)
    is stale: ignored without counting as a forgery."""
    m = Member(Variant.FAST, Mode.EXCLUSIVE)
    m.tracker.verify_own = True
    m.assign(P)
    late = m.heartbeat(P)
    m.tracker.sent(P, late.counter, late.sent_mono)
    m.clock.advance(T)
    newer = m.heartbeat(P)
    m.tracker.sent(P, newer.counter, newer.sent_mono)  # forgets the send T ago
    assert m.tracker.observe(P, late, late.sent_wall, m.mono) is None
    assert m.tracker.freshness(m.mono, m.wall)[P] is None
