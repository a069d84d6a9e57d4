"""Backoff for replays after permanent delivery errors: a refused record cannot spin a partition.

A role whose output fails replays its input from the first record not acknowledged. After a
timeout or a replaced producer that is what recovers, and it must be immediate (a fail-over's
gap depends on it). After a *permanent* error (the broker refuses the record: not authorized,
too large, invalid) the replay fails again the same way: replayed at once, the partition spins,
a produce and a seek per turn, and floods the logs. So the first replay after a permanent error
is immediate, and every further one in a row waits :data:`FIRST_BACKOFF_S`, doubling up to
:data:`MAX_BACKOFF_S`; output acknowledged on the partition, or a failure that is not
permanent, ends the streak.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from pricing_ha.kafka.producers import producer_is_wedged

__all__ = [
    "FIRST_BACKOFF_S",
    "MAX_BACKOFF_S",
    "TRANSIENT_ERRORS",
    "ReplayBackoff",
    "is_permanent",
]

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 10.0

#: Delivery errors that a later attempt may not meet (dead letters retry them too).
TRANSIENT_ERRORS = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._PURGE_QUEUE,
        KafkaError._PURGE_INFLIGHT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError._QUEUE_FULL,
    }
)


def is_permanent(err: Any) -> bool:
    """Whether a delivery error of an idempotent producer will recur on a replay: not a
    transient one, and not one that replacing the producer cures
    (:func:`~pricing_ha.kafka.producers.producer_is_wedged`)."""
    if err.code() in TRANSIENT_ERRORS or err.retriable():
        return False
    return producer_is_wedged(err, idempotent=True, transactional=False) is None


class ReplayBackoff:
    """Per-partition streaks of replays after permanent errors, and the replays held back.

    Not thread-safe: the worker thread's.
    """

    def __init__(self) -> None:
        """No streak, nothing held."""
        self._streak: dict[int, int] = {}
        self._held: dict[int, tuple[float, int]] = {}  # partition -> (due, offset to replay)
        #: Replays held back in all.
        self.delayed = 0

    def failed(self, partition: int, *, permanent: bool) -> float:
        """Output of ``partition`` failed and is to be replayed: how long to wait first."""
        if not permanent:
            self._streak.pop(partition, None)
            return 0.0
        streak = self._streak.get(partition, 0) + 1
        self._streak[partition] = streak
        if streak == 1:
            return 0.0
        return min(MAX_BACKOFF_S, FIRST_BACKOFF_S * float(2 ** min(streak - 2, 16)))

    def streaking(self) -> bool:
        """Whether any partition has a streak (cheap: asked per acknowledged record)."""
        return bool(self._streak)

    def delivered(self, partition: int) -> None:
        """Output of ``partition`` was acknowledged: its streak ends."""
        self._streak.pop(partition, None)

    def hold(self, partition: int, offset: int, due: float) -> None:
        """Replay ``partition`` from ``offset`` once the clock reaches ``due``, not before."""
        self._held[partition] = (due, offset)
        self.delayed += 1

    def holds(self, partition: int) -> bool:
        """Whether ``partition``'s replay is held back (its input is not processed meanwhile)."""
        return partition in self._held

    def due(self, now: float) -> list[tuple[int, int]]:
        """The held replays due at ``now`` (partition, offset), released."""
        out = [(p, offset) for p, (at, offset) in self._held.items() if at <= now]
        for partition, _offset in out:
            del self._held[partition]
        return out

    def forget(self, partition: int) -> None:
        """``partition`` is no longer worked on."""
        self._streak.pop(partition, None)
        self._held.pop(partition, None)
