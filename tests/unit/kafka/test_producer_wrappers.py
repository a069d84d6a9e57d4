"""A replaceable producer wraps a recurring delivery callback once per producer generation."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from tests.unit.kafka.producer_fakes import FakeError, make


def test_one_callback_is_wrapped_once_and_still_called_per_record() -> None:
    """Records sharing a callback share its wrapper; each delivery reaches the callback."""
    slot, built = make()
    calls: list[Any] = []

    def callback(err: Any, _msg: Any) -> None:
        calls.append(err)

    for value in (b"a", b"b", b"c"):
        slot.produce("t", value=value, on_delivery=callback)
    wrappers = [cb for cb, _ in built[0].pending]
    assert wrappers[0] is wrappers[1] is wrappers[2]
    built[0].settle(None, None, FakeError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert [err is None for err in calls] == [True, True, False]
    assert (slot.delivered, slot.failed) == (2, 1)


def test_another_callback_or_a_new_producer_gets_a_new_wrapper() -> None:
    """A different callback, or the same one after a replacement, is wrapped afresh, so the
    old producer's stragglers stay recognisable as stale."""
    slot, built = make()

    def first(_err: Any, _msg: Any) -> None:
        pass

    def second(_err: Any, _msg: Any) -> None:
        pass

    slot.produce("t", value=b"a", on_delivery=first)
    slot.produce("t", value=b"b", on_delivery=second)
    a, b = (cb for cb, _ in built[0].pending)
    assert a is not b
    slot.replace("test")
    slot.produce("t", value=b"c", on_delivery=second)
    ((c, _msg),) = built[1].pending
    assert c is not b
