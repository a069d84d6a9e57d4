"""Commits held back while a partition just taken up has not started (librdkafka waits for
in-flight commits before it starts fetching a newly assigned partition)."""

from __future__ import annotations

import pytest
from confluent_kafka import Message, TopicPartition

from pricing_ha.member.worker import RECOMMIT_IDLE_S, START_HOLD_S, PartitionWorker

TOPIC = "in"


class _Consumer:
    def __init__(self) -> None:
        self.commits: list[list[tuple[int, int]]] = []

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        assert asynchronous
        self.commits.append(sorted((tp.partition, tp.offset) for tp in offsets))

    def close(self) -> None:
        """Nothing to close."""


class _Worker(PartitionWorker):
    def __init__(self) -> None:
        super().__init__("test-worker", _Consumer(), lambda _p: True)  # type: ignore[arg-type]

    def assign(self, partition: int) -> None:
        self.starting([partition])

    def unassign(self, partition: int) -> None:
        """Nothing to release."""

    def process(self, batch: list[Message]) -> None:
        """Not used."""

    def idle(self) -> None:
        """Nothing to release."""

    @property
    def commits(self) -> list[list[tuple[int, int]]]:
        return self.consumer.commits  # type: ignore[attr-defined, no-any-return]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr("pricing_ha.member.worker.time.monotonic", c.monotonic)
    return c


def _tp(partition: int, offset: int) -> TopicPartition:
    return TopicPartition(TOPIC, partition, offset)


def _record(partition: int) -> Message:
    return Message(topic=TOPIC, partition=partition, offset=0, value=b"x")


def test_commits_go_out_at_once_when_nothing_is_starting(clock: _Clock) -> None:
    """No partition starting: every commit is sent as it comes."""
    w = _Worker()
    w.commit_async([_tp(0, 5)])
    w.commit_async([_tp(0, 7), _tp(1, 2)])
    assert w.commits == [[(0, 5)], [(0, 7), (1, 2)]]


def test_a_starting_partition_holds_commits_until_its_first_record(clock: _Clock) -> None:
    """Held commits merge (the latest per partition wins) and go out with the first commit
    after the new partition's first record was read."""
    w = _Worker()
    w.assign(1)
    w.commit_async([_tp(0, 5)])
    w.commit_async([_tp(0, 7)])
    assert w.commits == []
    w.note_read([_record(0)])  # another partition's record does not start partition 1
    w.commit_async([_tp(0, 8)])
    assert w.commits == []
    w.note_read([_record(0), _record(1)])
    w.commit_async([_tp(1, 3)])
    assert w.commits == [[(0, 8), (1, 3)]]


def test_a_partition_that_reads_nothing_holds_commits_for_a_bounded_time(clock: _Clock) -> None:
    """An idle new partition (no input) does not hold commits back for ever."""
    w = _Worker()
    w.assign(2)
    w.commit_async([_tp(0, 5)])
    clock.now += START_HOLD_S * 0.9
    w.commit_async([_tp(0, 6)])
    assert w.commits == []
    clock.now += START_HOLD_S * 0.2
    w.commit_async([_tp(0, 7)])
    assert w.commits == [[(0, 7)]]


def test_a_barrier_commits_at_once_with_everything_held(clock: _Clock) -> None:
    """``now=True`` (a revocation, a close) sends the held commits too."""
    w = _Worker()
    w.assign(1)
    w.commit_async([_tp(0, 5)])
    w.commit_async([], now=True)
    assert w.commits == [[(0, 5)]]
    w.commit_async([], now=True)
    assert w.commits == [[(0, 5)]]  # nothing held: nothing sent


def test_idle_input_commits_the_last_positions_again(clock: _Clock) -> None:
    """With no input, the active partitions' last committed positions go out again every
    RECOMMIT_IDLE_S (another member may have committed an older one since); a partition that
    stopped being worked on is not, even once taken up again (its old position is stale)."""
    w = _Worker()
    w.active = {0, 1}
    w.commit_async([_tp(0, 5), _tp(1, 9)])
    w.commit_async([_tp(0, 7)])
    w.no_input()
    assert w.commits == [[(0, 5), (1, 9)], [(0, 7)]]  # not yet: committed just now
    clock.now += RECOMMIT_IDLE_S * 1.1
    w.drop(1)
    w.no_input()
    assert w.commits[2:] == [[(0, 7)]]
    w.no_input()
    assert len(w.commits) == 3  # once per interval
    w.active.add(1)  # taken up again: nothing committed for it since
    clock.now += RECOMMIT_IDLE_S * 1.1
    w.no_input()
    assert w.commits[3:] == [[(0, 7)]]
    w.drop(0)
    clock.now += RECOMMIT_IDLE_S * 1.1
    w.no_input()
    assert len(w.commits) == 4  # nothing committed for what is active: nothing to send
