"""A joining relay's standby tail resumes from the latest checkpoint on ``prices`` (over a
fake reader): it agrees with a full read, skips a malformed checkpoint, reads a partition whose
end is unknown from its start, and checkpoints are offered only when prices came since."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from pricing_ha.dedupe import checkpoint_search
from pricing_ha.dedupe.control import (
    CHECKPOINT,
    PROBE,
    TAKEOVER,
)
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.kafka.headers import CONTROL_HEADER
from tests.unit.dedupe.standby_log import Log, read_to_end, tail_of


def _history(log: Log, partition: int, start: int, n: int) -> None:
    for seq in range(start, start + n):
        log.price(partition, "EURUSD" if seq % 2 else "GBPUSD", seq)


def _checkpoint(log: Log, partition: int, writer: StandbyTail) -> int:
    got = writer.checkpoint(partition, -1)
    assert got is not None
    headers = [(CONTROL_HEADER, CHECKPOINT), ("relay", b"r2")]
    return log.append(partition, key=None, value=got[0], headers=headers)


def test_a_joining_tail_resumes_from_the_latest_checkpoint_and_agrees_with_a_full_read() -> None:
    log = Log(2)
    log.control(0, TAKEOVER, "r2/xyz:1")
    _history(log, 0, 1, 5_000)
    writer = tail_of(log, token="r2/xyz")
    read_to_end(writer, log)
    _checkpoint(log, 0, writer)  # an early one: the search must take the latest
    _history(log, 0, 5_001, 3_000)
    log.control(0, PROBE, "r3/qqq:1")
    read_to_end(writer, log)
    position = writer.views[0].position
    _checkpoint(log, 0, writer)
    _history(log, 0, 8_001, 50)  # after the checkpoint
    _history(log, 1, 1, 20)  # a partition without any checkpoint: read from its start

    joiner = tail_of(log, token="r1/new", resume=True)
    assert joiner.resumed == {0: position}
    read_to_end(joiner, log)
    full = tail_of(log, token="r1/full")
    read_to_end(full, log)
    for mine, theirs in zip(joiner.views, full.views, strict=True):
        assert (mine.high, mine.last_data, mine.term, mine.requests) == (
            theirs.high,
            theirs.last_data,
            theirs.term,
            theirs.requests,
        )
    assert joiner.views[0].high == {"EURUSD": 8_049, "GBPUSD": 8_050}
    # The search read back a window (512 records) and the tail the ~50 after the checkpoint,
    # not 8,000.
    assert joiner.records < checkpoint_search._SEARCH_FIRST + 100 + 20 + 10
    # Another member (r3) asked after r2's term, as the full read also says.
    assert joiner.requested_after(0, 0)


def _checkpointed_after_100() -> Log:
    """One partition: 100 prices, then a checkpoint another member wrote at offset 100."""
    log = Log(1)
    _history(log, 0, 1, 100)
    writer = tail_of(log, token="r2/xyz")
    read_to_end(writer, log)
    _checkpoint(log, 0, writer)
    return log


def test_a_malformed_checkpoint_is_skipped_for_an_earlier_one() -> None:
    log = _checkpointed_after_100()
    _history(log, 0, 101, 10)
    log.append(0, key=None, value=b"{not json", headers=[(CONTROL_HEADER, CHECKPOINT)])
    log.append(
        0,
        key=None,
        value=b'{"v": 1, "position": 99999, "high": {}, "last_data": 0, '
        b'"term": -1, "released_term": -1, "released_at": -1, "requests": {}}',
        headers=[(CONTROL_HEADER, CHECKPOINT)],
    )  # a position above itself
    joiner = tail_of(log, token="r1/new", resume=True)
    assert joiner.resumed == {0: 100}
    read_to_end(joiner, log)
    assert joiner.views[0].high == {"EURUSD": 109, "GBPUSD": 110}


def test_an_unknown_end_reads_the_partition_from_its_start() -> None:
    log = _checkpointed_after_100()
    log.end_error = KafkaException(KafkaError(KafkaError._TIMED_OUT))
    joiner = tail_of(log, token="r1/new", resume=True)
    assert joiner.resumed == {}
    read_to_end(joiner, log)
    assert joiner.views[0].high == {"EURUSD": 99, "GBPUSD": 100}
    assert joiner.records >= 100


def test_checkpoints_are_offered_only_when_prices_came_since_the_last() -> None:
    log = Log(1)
    tail = tail_of(log)
    assert tail.checkpoint(0, -1) is None  # not at the end yet
    read_to_end(tail, log)
    tail.step(0)
    assert tail.checkpoint(0, -1) is None  # no price at all
    _history(log, 0, 1, 3)
    read_to_end(tail, log)
    got = tail.checkpoint(0, -1)
    assert got is not None
    assert got[1] == 2
    assert tail.checkpoint(0, got[1]) is None
