"""Pausing the broker under a producing component, and what its producers saw (for
``test_producer_recovery``).

:func:`record_deliveries` replaces confluent-kafka's producer, in the product's producer module,
with one that notes every successful delivery callback by ``client.id`` and can run a hook
before a given record is produced; :class:`MidBatchPause` uses that hook to SIGSTOP the broker
while a component is producing, :func:`pause_broker` pauses it from the test's thread, and
:func:`assert_resumed_in_time` checks the first delivery after SIGCONT.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Producer

import pricing_ha.dedupe.output_producers
import pricing_ha.kafka.producers
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.waiting import wait_for

# message.timeout.ms of every producer under test (the feed's, the publisher's, the relay's) and
# the pause. librdkafka notices timeouts in a scan once a second, so a record queued when the
# pause began fails between T and T + 1 s into it: the pause must outlast T + 1 s for the wedge
# (and the replacement) to happen in it every time. The feed keeps producing during the pause:
# what its new producer queues at the replacement (>= T) fails from 2 T on, so the pause must
# end more than the ~0.5 s a new producer needs for its producer id before then. T = 3 s and a
# 4.5 s pause leave 0.5 s and 1 s of margin (T = 2 s would leave 0.25 s on each side).
MESSAGE_TIMEOUT_MS = 3000
PAUSE_S = 4.5
# The first delivery after SIGCONT: alone on the machine 0.05-0.63 s (the publisher, 5 runs),
# once 1.08 s under the whole suite's load; a producer left waiting out its message timeout
# (MESSAGE_TIMEOUT_MS) would take seconds more.
RESUME_BOUND_S = 1.5


@dataclass
class Target:
    """The broker a test runs against, and its :class:`LocalKafka` when the test may pause it."""

    bootstrap: str
    broker: LocalKafka | None


@dataclass
class Deliveries:
    """Monotonic times of successful delivery callbacks, by producer ``client.id``."""

    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    factory: Callable[[dict[str, Any]], Any] = Producer
    """Builds a recording producer (for run_feed's producer_factory)."""
    produced: Counter[str] = field(default_factory=Counter)
    """Records handed to ``produce``, by ``client.id`` (every generation of its producer)."""
    before_produce: dict[str, Callable[[int], None]] = field(default_factory=dict)
    """Called with the record's number (from 1) before ``client.id`` produces it."""

    def count(self, client: str) -> int:
        """How many records ``client`` has seen acknowledged."""
        return len(self.times[client])

    def first_after(self, client: str, at: float) -> float | None:
        """When ``client`` first saw a record acknowledged after ``at``, if it has."""
        return next((t for t in list(self.times[client]) if t > at), None)


def record_deliveries(monkeypatch: pytest.MonkeyPatch) -> Deliveries:
    """Record every producer's successful deliveries (the components' own producers too), for
    the rest of the test."""
    seen = Deliveries()

    class RecordingProducer(Producer):
        """confluent-kafka's producer, noting when each delivery callback reports success."""

        def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
            super().__init__(config, **kwargs)
            self.client = str(config.get("client.id", "?"))
            self.times = seen.times[self.client]

        def produce(
            self,
            topic: str,
            *args: Any,
            on_delivery: Callable[..., None] | None = None,
            **kwargs: Any,
        ) -> None:
            client = self.client
            seen.produced[client] += 1
            hook = seen.before_produce.get(client)
            if hook is not None:
                hook(seen.produced[client])
            times = self.times

            def delivered(err: Any, msg: Any) -> None:
                if err is None:
                    times.append(time.monotonic())
                if on_delivery is not None:
                    on_delivery(err, msg)

            kwargs["on_delivery"] = delivered
            super().produce(topic, *args, **kwargs)

    # The publisher's and the relay's producers come from the ReplaceableProducer's default
    # factory, which builds pricing_ha.kafka.producers.Producer; the relay's transactional
    # producers (one per partition) from its fences' default, in the output_producers module.
    monkeypatch.setattr(pricing_ha.kafka.producers, "Producer", RecordingProducer)
    monkeypatch.setattr(pricing_ha.dedupe.output_producers, "Producer", RecordingProducer)
    seen.factory = RecordingProducer
    return seen


def pause_broker(target: Target) -> float:
    """SIGSTOP the broker for PAUSE_S; return the monotonic time of SIGCONT (always sent)."""
    assert target.broker is not None
    target.broker.pause()
    try:
        time.sleep(PAUSE_S)  # the fault itself, not a wait for a condition
    finally:
        target.broker.resume()
    return time.monotonic()


@dataclass
class MidBatchPause:
    """SIGSTOPs the broker from inside a component's ``produce`` call, so that the component
    is producing when the broker stops (a pause begun from the test's thread can fall between
    two batches of a component that flushes each one: it then has nothing in flight, and the
    pause tests nothing). SIGCONT follows PAUSE_S later, from a thread of its own."""

    broker: LocalKafka
    sigcont: float | None = None
    _thread: threading.Thread | None = None
    _started: threading.Event = field(default_factory=threading.Event)

    def arm(self, deliveries: Deliveries, client: str, at: int) -> None:
        """Pause just before ``client`` produces its record number ``at``."""

        def hook(number: int) -> None:
            if number == at and self._thread is None:
                self.broker.pause()
                self._thread = threading.Thread(target=self._resume, name="sigcont")
                self._thread.start()
                self._started.set()

        deliveries.before_produce[client] = hook

    def _resume(self) -> None:
        try:
            time.sleep(PAUSE_S)  # the fault itself, not a wait for a condition
        finally:
            self.broker.resume()
            self.sigcont = time.monotonic()

    def wait(self) -> float:
        """Wait for the pause to start and end; return the monotonic time of SIGCONT."""
        wait_for(self._started.is_set, 60, "the component to produce", interval_s=0.01)
        assert self._thread is not None
        self._thread.join(PAUSE_S + 30)
        assert self.sigcont is not None, "the broker was not resumed"
        return self.sigcont

    def disarm(self) -> None:
        """Make sure the broker runs again (a test that failed before SIGCONT)."""
        if self._started.is_set() and self._thread is not None:
            self._thread.join(PAUSE_S + 30)
        self.broker.resume()


def assert_resumed_in_time(deliveries: Deliveries, client: str, sigcont: float) -> float:
    """Wait for ``client``'s first delivery after SIGCONT; fail if it came too late."""
    wait_for(
        lambda: deliveries.first_after(client, sigcont) is not None,
        30,
        f"{client} to deliver after SIGCONT",
        interval_s=0.05,
    )
    first = deliveries.first_after(client, sigcont)
    assert first is not None
    took = first - sigcont
    print(f"{client}: first delivery {took:.3f} s after SIGCONT")
    assert took <= RESUME_BOUND_S, f"{client} delivered again only {took:.3f} s after SIGCONT"
    return took
