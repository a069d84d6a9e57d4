"""The relay's liveness reader survives a failed session (e.g. no broker at start)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from pricing_ha.dedupe import liveness as liveness_module
from pricing_ha.dedupe.liveness import Liveness, LivenessReader
from pricing_ha.local.waiting import wait_for
from tests.unit.dedupe.test_relay_detector import G, hb

TOPIC = "pricing.neli"


@dataclass
class _Msg:
    payload: bytes

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self.payload


@dataclass
class _Meta:
    topics: dict[str, Any]


@dataclass
class _Topic:
    partitions: dict[int, object]


@dataclass
class FakeConsumers:
    """Consumers whose first ``failures`` metadata requests fail; then heartbeats of r1."""

    failures: int
    made: int = 0
    closed: int = 0
    beats: list[bytes] = field(default_factory=lambda: [hb("r1", led=(0,)).encode()])
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, settings: dict[str, Any]) -> FakeConsumers:
        with self.lock:
            self.made += 1
        return self

    def list_topics(self, topic: str, timeout: float) -> _Meta:
        if self.made <= self.failures:
            raise KafkaException("Local: Broker transport failure")
        return _Meta({topic: _Topic({0: None, 1: None})})

    def assign(self, parts: list[Any]) -> None:
        pass

    def consume(self, n: int, timeout: float) -> list[_Msg]:
        time.sleep(0.01)
        with self.lock:
            out, self.beats = self.beats, []
        return [_Msg(b) for b in out]

    def close(self) -> None:
        self.closed += 1


def test_a_session_that_fails_is_started_again_and_readiness_says_why_meanwhile(
    monkeypatch: Any,
) -> None:
    """No broker for two sessions: the reader says so, retries, then feeds heartbeats."""
    monkeypatch.setattr(liveness_module, "_RETRY_FIRST_S", 0.05)
    fake = FakeConsumers(failures=2)
    live = Liveness(G, "r2", 0.35)
    reader = LivenessReader({}, TOPIC, live, consumer=fake)
    seen: list[str] = []
    reader.start()
    try:
        wait_for(lambda: reader.problem() is not None, 5, "the first failure reported")
        seen.append(reader.problem() or "")
        wait_for(lambda: live.claimed_at(0) > float("-inf"), 5, "r1's heartbeat fed after retries")
        assert reader.problem() is None
    finally:
        reader.close()
    assert "Broker transport failure" in seen[0]
    assert TOPIC in seen[0]
    assert (fake.made, reader.restarts) == (3, 2)
    assert fake.closed == 3  # every session's consumer closed, the failed ones included
