"""The relay simulation's fake producer: librdkafka's producer surface as the relay uses it.

* :class:`FakeProducer` holds produced records until they are due (a per-record latency),
  lands them on the log in produce order and calls their delivery callbacks from ``poll`` and
  ``flush`` like librdkafka. A record whose latency exceeds ``message.timeout.ms`` fails with
  ``_MSG_TIMED_OUT`` and does not land, unless :attr:`World.ghosts` is set: then it lands anyway
  (in flight past the timeout, the documented remaining window) and is recorded as a ghost.
* A producer with a ``transactional.id`` gets the transaction calls. ``init_transactions``
  registers a new epoch for its id (:attr:`World.epochs`); the "broker" rejects, at the moment
  it would land, every record produced under an older epoch (``PRODUCER_FENCED``), ghosts
  included; a stale producer's ``commit_transaction`` waits out its timeout and fails (the
  slowest answer a broker can give: Apache Kafka answers ``PRODUCER_FENCED`` at once). Records
  land when acknowledged, committed or not: aborted records stay visible, which is stricter
  than Apache Kafka's ``read_committed`` (it hides them).

Landing, fencing and ghosts are decided by the world (:meth:`World.deliver`, :meth:`World.tick`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException

from pricing_ha.config import RelayConfig

if TYPE_CHECKING:
    from tests.sim.relay.relay_world import World

#: The relay producer's message.timeout.ms (what the relay's waits rely on).
MESSAGE_TIMEOUT_S = RelayConfig().output_timeout_ms / 1000


@dataclass
class Pending:
    """A produced record held by its :class:`FakeProducer` until it is due, with its fate."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, Any]]
    callback: Any
    due: float
    outcome: str  # "ok" | "timeout" | "fail"
    purged: bool = False
    fence: tuple[str, int] | None = None  # (transactional.id, epoch) of its producer
    produced: float = 0.0  # when it was produced: its CreateTime


class FakeProducer:
    """librdkafka's producer surface as the relay uses it (see the module docstring)."""

    def __init__(self, world: World, owner: str, settings: dict[str, Any] | None = None) -> None:
        """A producer of member ``owner`` (transactional if ``settings`` give an id)."""
        self._world = world
        self._owner = owner
        self._pending: list[Pending] = []
        self._last_due = 0.0
        self._txid: str | None = (settings or {}).get("transactional.id")
        self._epoch: int | None = None
        self._failed_in_txn = False

    # -- transactions -----------------------------------------------------------------------

    def _stale(self) -> bool:
        assert self._txid is not None
        return self._epoch != self._world.epochs.get(self._txid)

    def init_transactions(self, timeout: float = -1) -> None:
        """A new epoch for the id: the previous holder's records are rejected from now on."""
        assert self._txid is not None, "not a transactional producer"
        world = self._world
        if world.clock.now < world.faults[self._owner].slow_until:
            world.clock.advance(min(timeout, 1.0))
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        world.epochs[self._txid] = world.epochs.get(self._txid, 0) + 1
        self._epoch = world.epochs[self._txid]
        world.note(f"  {self._owner} init_transactions {self._txid} epoch {self._epoch}")

    def begin_transaction(self) -> None:
        """Start a transaction (fails at once once fenced)."""
        if self._epoch is None or self._stale():
            raise KafkaException(KafkaError(KafkaError._FENCED))
        self._failed_in_txn = False

    def commit_transaction(self, timeout: float = -1) -> None:
        """Flush, then commit; a fenced producer waits out ``timeout`` and fails."""
        left = self.flush(timeout)
        if self._stale():
            self._world.clock.advance(timeout)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        if left or self._failed_in_txn:
            raise KafkaException(KafkaError(KafkaError._STATE))

    def produce(  # noqa: PLR0917 - confluent-kafka's signature
        self,
        topic: str,
        key: bytes | None = None,
        value: bytes | None = None,
        partition: int = -1,
        headers: list[tuple[str, Any]] | None = None,
        on_delivery: Any = None,
    ) -> None:
        """Queue a record with its latency and fate."""
        world = self._world
        now = world.clock.now
        faults = world.faults[self._owner]
        rng = world.rng
        latency = rng.uniform(0.2, 5.0) if now < faults.slow_until else rng.uniform(0.001, 0.01)
        outcome = "ok"
        if now < faults.fail_until:
            outcome = "fail"
        elif latency > MESSAGE_TIMEOUT_S:
            outcome = "timeout"
        if not self._world.output_gaps:
            # In order per partition: behind a record that will fail, every later record of
            # the partition fails too (a broker that refuses the bumped epoch after a timeout).
            # With output_gaps, a later record may land (Apache Kafka accepts the bumped epoch:
            # librdkafka's idempotent producer without the gapless guarantee).
            earlier = [r for r in self._pending if r.partition == partition and r.topic == topic]
            if earlier and earlier[-1].outcome != "ok":
                outcome = earlier[-1].outcome
        due = max(self._last_due, now + min(latency, MESSAGE_TIMEOUT_S))
        self._last_due = due
        fence = None if self._txid is None or self._epoch is None else (self._txid, self._epoch)
        self._pending.append(
            Pending(
                topic,
                partition,
                key,
                value,
                list(headers or []),
                self._delivered(on_delivery),
                due,
                outcome,
                fence=fence,
                produced=now,
            )
        )

    def _delivered(self, on_delivery: Any) -> Any:
        if self._txid is None:
            return on_delivery

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self._failed_in_txn = True
            if on_delivery is not None:
                on_delivery(err, msg)

        return delivered

    def _settle(self) -> None:
        now = self._world.clock.now
        while self._pending and (self._pending[0].due <= now or self._pending[0].purged):
            rec = self._pending.pop(0)
            self._world.deliver(self._owner, rec)

    def poll(self, timeout: float = 0) -> int:
        """Serve the callbacks of records that are due."""
        before = len(self._pending)
        self._settle()
        return before - len(self._pending)

    def flush(self, timeout: float = 0) -> int:
        """Wait (simulated time) up to ``timeout`` for every record; return how many are left.

        A member stopped in its flush (:meth:`World.stop_in_flush`) is stopped here, with its
        records unsent, while the others go on."""
        clock = self._world.clock
        if self._pending and self._world.stop_in_flush.get(self._owner) is not None:
            self._world.stop_in_flush.pop(self._owner)(self._owner)
        if self._pending:
            last = (
                max(r.due for r in self._pending if not r.purged)
                if any(not r.purged for r in self._pending)
                else clock.now
            )
            clock.advance(min(last, clock.now + timeout) - clock.now)
            self._settle()
            self._world.pump()
        return len(self._pending)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail everything still held (callbacks at the next poll or flush)."""
        for rec in self._pending:
            rec.purged = True

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        """The broker answers (no broker outage is modelled beyond slow acknowledgements)."""
        if self._world.clock.now < self._world.faults[self._owner].slow_until:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return object()

    def __len__(self) -> int:
        return len(self._pending)
