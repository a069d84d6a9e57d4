"""Deciding that a producer is wedged, and replacing it, over fake errors and fake producers."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import KafkaError

from pricing_ha.kafka.producers import (
    is_idempotent,
    is_transactional,
    producer_is_wedged,
)

if TYPE_CHECKING:
    pass
from tests.unit.kafka.producer_fakes import Clock, FakeError, make, timed_out


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
        KafkaError.UNKNOWN_PRODUCER_ID,
    ],
)
def test_epoch_rejections_wedge_an_idempotent_producer_without_transactional_id(code: int) -> None:
    """Fencing-type errors end an idempotent, non-transactional producer (they are not fatal)."""
    err: Any = FakeError(code)
    reason = producer_is_wedged(err, idempotent=True, transactional=False)
    assert reason is not None
    assert KafkaError(code).name() in reason
    assert producer_is_wedged(err, idempotent=True, transactional=True) is None


def test_a_timeout_wedges_only_an_idempotent_producer() -> None:
    """_MSG_TIMED_OUT ends an idempotent producer (epoch bumped), not a plain one."""
    assert producer_is_wedged(timed_out(), idempotent=True, transactional=False) is not None
    assert producer_is_wedged(timed_out(), idempotent=True, transactional=True) is not None
    assert producer_is_wedged(timed_out(), idempotent=False, transactional=False) is None


def test_any_fatal_error_wedges_any_producer() -> None:
    """An error librdkafka flags fatal ends the producer whatever its code and settings."""
    err: Any = FakeError(KafkaError._FENCED, fatal=True)
    assert producer_is_wedged(err, idempotent=False, transactional=False) == "fatal error _FENCED"


@pytest.mark.parametrize(
    "code",
    [KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._TRANSPORT, KafkaError.UNKNOWN_TOPIC_OR_PART],
)
def test_ordinary_errors_do_not_wedge(code: int) -> None:
    """A record-level or transient error leaves the producer in service."""
    err: Any = FakeError(code, retriable=code == KafkaError._TRANSPORT)
    assert producer_is_wedged(err, idempotent=True, transactional=False) is None


def test_the_classifier_accepts_real_kafka_errors() -> None:
    """confluent-kafka's own KafkaError objects are classified the same way."""
    assert producer_is_wedged(
        KafkaError(KafkaError._MSG_TIMED_OUT), idempotent=True, transactional=False
    )
    fatal = KafkaError(KafkaError._FENCED, fatal=True)
    assert producer_is_wedged(fatal, idempotent=False, transactional=False)


def test_idempotence_and_transactions_are_read_from_the_config() -> None:
    """Booleans, librdkafka's string forms and a transactional.id all count."""
    assert is_idempotent({"enable.idempotence": True})
    assert is_idempotent({"enable.idempotence": "true"})
    assert not is_idempotent({"enable.idempotence": "false"})
    assert not is_idempotent({})
    assert is_idempotent({"transactional.id": "t1"})
    assert is_transactional({"transactional.id": "t1"})
    assert not is_transactional({"enable.idempotence": True})


# -- the replaceable producer ------------------------------------------------------------------


def test_a_wedged_producer_is_replaced_after_its_callbacks_ran(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A timeout marks it wedged; replacing purges the old one, then calls on_replaced once."""
    seen: list[tuple[int, Any]] = []
    replaced: list[str] = []
    slot, built = make(on_replaced=replaced.append)

    def record(i: int, err: Any, _m: Any) -> None:
        seen.append((i, err))

    for i in range(3):
        slot.produce("t", value=b"x", on_delivery=functools.partial(record, i))
    old = built[0]
    old.settle(None, timed_out())
    assert slot.wedged is not None
    assert slot.problem is not None
    assert slot.replacements == 0  # nothing happens inside a delivery callback
    reason = slot.wedged
    with caplog.at_level(logging.INFO, logger="test.producers"):
        assert slot.replace_if_wedged() == reason
    assert old.purged
    assert len(built) == 2
    assert slot.producer is built[1]
    assert slot.replacements == 1
    assert slot.wedged is None
    assert replaced == ["_MSG_TIMED_OUT on an idempotent producer (its epoch is bumped locally)"]
    assert [(i, None if e is None else e.name()) for i, e in seen] == [
        (0, None),
        (1, "_MSG_TIMED_OUT"),
        (2, "_PURGE_QUEUE"),  # the old producer's last record failed before on_replaced
    ]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "producer replaced (#1)" in line
    assert "_MSG_TIMED_OUT" in line
    assert "1 delivered, 2 failed" in line


def test_callbacks_of_the_old_producer_do_not_wedge_the_new_one() -> None:
    """Errors the old producer reports while it is closed count, but mark nothing wedged."""
    slot, built = make()
    slot.produce("t", value=b"x")
    slot.produce("t", value=b"y")
    built[0].settle(FakeError(KafkaError.PRODUCER_FENCED))
    stale, msg = built[0].pending[0]
    slot.replace_if_wedged()
    stale(FakeError(KafkaError.PRODUCER_FENCED), msg)  # a straggler of the old producer
    assert slot.wedged is None
    assert slot.replace_if_wedged() is None
    assert len(built) == 2
    assert slot.failed == 3  # fenced, purged, and the straggler


def test_the_first_delivery_of_the_new_producer_clears_the_problem(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After a replacement the producer is a problem until it delivers; that is logged once."""
    clock = Clock()
    slot, built = make(clock=clock)
    slot.produce("t", value=b"x")
    built[0].settle(timed_out())
    slot.replace_if_wedged()
    assert slot.problem is not None
    assert "replaced after" in slot.problem
    clock.now = 3.5
    slot.produce("t", value=b"x")
    with caplog.at_level(logging.INFO, logger="test.producers"):
        built[1].settle(None)
    assert slot.problem is None
    assert slot.recovered_at == 3.5
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "test-prices: delivering again, 3.50 s after replacement #1"
    ]


def test_ordinary_failures_keep_the_producer_and_are_logged_at_most_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Record-level failures are counted, and summarised in one line per report interval."""
    clock = Clock()
    slot, built = make(clock=clock, report_interval_s=10.0)
    too_large = FakeError(KafkaError.MSG_SIZE_TOO_LARGE)
    with caplog.at_level(logging.ERROR, logger="test.producers"):
        for _ in range(5):
            slot.produce("t", value=b"x")
            built[0].settle(too_large)
            slot.poll(0)
            clock.now += 1
        clock.now = 11
        slot.poll(0)
    assert slot.wedged is None
    assert slot.replace_if_wedged() is None
    assert len(built) == 1
    assert slot.failed == 5
    assert [r.getMessage() for r in caplog.records] == [
        "test-prices: 1 records not delivered (MSG_SIZE_TOO_LARGE x1); the producer is kept",
        "test-prices: 4 records not delivered (MSG_SIZE_TOO_LARGE x4); the producer is kept",
    ]


def test_a_fatal_error_wedges_even_a_plain_producer() -> None:
    """fatal() ends any producer, idempotent or not."""
    slot, built = make({"acks": "all"})
    slot.produce("t", value=b"x")
    built[0].settle(FakeError(KafkaError._FATAL, fatal=True))
    assert slot.wedged == "fatal error _FATAL"
    slot.produce("t", value=b"x")
    built[0].settle(timed_out())  # not a reason on a non-idempotent producer; first one wins
    assert slot.wedged == "fatal error _FATAL"


def test_an_unfinished_flush_is_a_problem_until_a_quiet_delivery_timeout_passes() -> None:
    """Records left by flush make the producer not ready; with nothing outstanding it clears."""
    clock = Clock()
    slot, built = make(clock=clock)
    slot.produce("t", value=b"x")
    built[0].flush_left = 1
    assert slot.flush(1.0) == 1
    assert slot.problem == "1 records unacknowledged after 1 s"
    built[0].flush_left = 0
    built[0].settle(FakeError(KafkaError._MSG_TIMED_OUT, retriable=False))
    slot.replace_if_wedged()
    clock.now = 1.9  # less than message.timeout.ms (2 s) after the replacement
    slot.poll(0)
    assert slot.problem is not None
    clock.now = 2.0
    slot.poll(0)
    assert slot.problem is None  # nothing to deliver and nothing failed for 2 s


def test_producers_connect_to_every_broker_unless_configured_otherwise() -> None:
    """Sparse connections are off by default (a replacement gets its id sooner), not forced."""
    _, built = make()
    assert built[0].config["enable.sparse.connections"] is False
    _, built = make({"enable.idempotence": True, "enable.sparse.connections": True})
    assert built[0].config["enable.sparse.connections"] is True


def test_the_owner_may_mark_the_producer_wedged() -> None:
    """mark_wedged replaces the producer at the next replace_if_wedged; first reason wins."""
    slot, built = make()
    assert slot.replace_if_wedged() is None
    slot.mark_wedged("owner says so")
    slot.mark_wedged("second opinion")
    assert slot.replace_if_wedged() == "owner says so"
    assert len(built) == 2
    assert slot.message_timeout_s == 2.0
