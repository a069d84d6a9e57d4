"""Fake librdkafka errors and producers, and a ReplaceableProducer built over them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, Message

from pricing_ha.kafka.producers import (
    ReplaceableProducer,
)

if TYPE_CHECKING:
    pass


IDEMPOTENT = {"enable.idempotence": True, "message.timeout.ms": 2000}


class FakeError:
    """Quacks like a confluent-kafka ``KafkaError`` (code, name, the three flags, str)."""

    def __init__(
        self,
        code: int,
        *,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        """An error with ``code`` and the given flags."""
        self._code = code
        self._fatal = fatal
        self._retriable = retriable
        self._abort = txn_requires_abort

    def code(self) -> int:
        """The error code."""
        return self._code

    def name(self) -> str:
        """The code's name, as librdkafka spells it."""
        return KafkaError(self._code).name()

    def fatal(self) -> bool:
        """Whether librdkafka flagged the error fatal."""
        return self._fatal

    def retriable(self) -> bool:
        """Whether librdkafka flagged the error retriable."""
        return self._retriable

    def txn_requires_abort(self) -> bool:
        """Whether the transaction must be aborted."""
        return self._abort

    def str(self) -> str:
        """A human-readable description."""
        return f"fake {self.name()}"


def timed_out() -> Any:
    """What librdkafka reports for a record that outlived message.timeout.ms."""
    return FakeError(KafkaError._MSG_TIMED_OUT)


class FakeProducer:
    """Keeps each record's delivery callback until the test settles it."""

    def __init__(self, config: dict[str, Any]) -> None:
        """A producer with nothing queued."""
        self.config = config
        self.pending: list[tuple[Callable[[Any, Any], None], Message]] = []
        self.purged = False
        self.flush_left = 0  # what flush() reports as still queued

    def produce(self, topic: str, **kwargs: Any) -> None:
        """Queue one record."""
        msg = Message(topic=topic, partition=kwargs.get("partition", 0), value=kwargs.get("value"))
        self.pending.append((kwargs["on_delivery"], msg))

    def settle(self, *errors: Any) -> None:
        """Run the oldest callbacks, one per error (``None``: acknowledged), as poll would."""
        for err in errors:
            callback, msg = self.pending.pop(0)
            callback(err, msg)

    def poll(self, timeout: float = 0) -> int:
        """Serve nothing by itself (the test settles records explicitly)."""
        return 0

    def flush(self, timeout: float = 0) -> int:
        """Report ``flush_left`` records as still queued."""
        return self.flush_left

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail everything still queued, as librdkafka does on the next poll or flush."""
        self.purged = True
        queued, self.pending = self.pending, []
        for callback, msg in queued:
            callback(FakeError(KafkaError._PURGE_QUEUE), msg)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        """Time zero."""
        self.now = 0.0

    def __call__(self) -> float:
        """The current time."""
        return self.now


def make(
    config: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[ReplaceableProducer[FakeProducer], list[FakeProducer]]:
    """A replaceable producer over fakes, and the list of fakes it has built."""
    built: list[FakeProducer] = []

    def factory(cfg: dict[str, Any]) -> FakeProducer:
        built.append(FakeProducer(cfg))
        return built[-1]

    slot: ReplaceableProducer[FakeProducer] = ReplaceableProducer(
        IDEMPOTENT if config is None else config,
        name="test-prices",
        logger=logging.getLogger("test.producers"),
        factory=factory,
        **kwargs,
    )
    return slot, built


# -- the classifier ----------------------------------------------------------------------------
