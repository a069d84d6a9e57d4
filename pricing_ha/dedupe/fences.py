"""The relay's fences: one transactional producer per owned partition of ``prices``.

Each partition this relay owns is written by a transactional producer of its own, whose
``transactional.id`` is derived from the relay group and the partition
(:meth:`Fences.transactional_id`). A takeover calls :meth:`Fences.fence` first:
``init_transactions`` makes the broker reject every later write of the previous owner's producer
for that partition (and abort its open transaction). Records are then produced inside
transactions (:meth:`Fences.begin`) and committed together (:meth:`Fences.commit_open`); a
transaction that cannot begin or commit ends that partition's producer, and ``on_lost`` tells
the owner to start the partition over under a new one.

A member about to take a partition over (its probe written) prepares the partition's producer
first (:meth:`Fences.prepare`): created, it connects to the cluster while the old owner
releases, and the takeover's ``init_transactions`` then costs the coordinator's round trips
only. A fresh producer under load took more than an attempt's 150 ms to connect and ask, was
let go, and the next fresh one started over (a planned move's takeover: 255 ms of
``init_transactions``). Creating a producer sends nothing to the transaction coordinator: it
fences nobody until its ``init_transactions``.

What the broker makes of it (docs/architecture.md, "What fencing guarantees"): it rejects the
fenced producer's writes and hides its aborted records from ``read_committed`` readers. A commit
the broker does not answer fails after :data:`COMMIT_TIMEOUT_S`, so that a stalled broker cannot
hold the relay's worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from pricing_ha.kafka.producers import ConfigValue

__all__ = [
    "COMMIT_TIMEOUT_S",
    "FENCE_ERRORS",
    "Fences",
]

# What a call on a transactional producer can raise. Once the producer is fenced, confluent-kafka
# raises librdkafka's fatal error from inside poll/flush/commit while delivery callbacks still
# run there; the next callback to touch the C API then fails with SystemError, chained to the
# fatal error. Both mean the same: this producer is done (a paused owner woke up fenced, and
# its worker died of the SystemError until both were caught).
FENCE_ERRORS = (KafkaException, SystemError)

_INIT_ATTEMPT_S = 0.15  # one producer's try at init_transactions (see Fences._init)

log = logging.getLogger("pricing_ha.relay")

COMMIT_TIMEOUT_S = 2.0  # a commit not answered by then fails (the partition is started over)


class Fences:
    """The transactional producers of the partitions one relay member owns. Worker thread only.

    Args:
        config: every producer's configuration (without ``transactional.id``/``client.id``).
        id_prefix: ``transactional.id`` is ``{id_prefix}.{partition}``.
        client_prefix: ``client.id`` is ``{client_prefix}-{partition}``.
        make: builds a producer from its configuration (the simulation passes a fake).
        on_lost: called with a partition whose producer was ended (its output must be
            started over).
        workers: threads for initialisations and commits side by side (0: one after another,
            as the simulation needs: its producers share one simulated clock).
    """

    def __init__(
        self,
        config: dict[str, ConfigValue],
        *,
        id_prefix: str,
        client_prefix: str,
        make: Callable[[dict[str, ConfigValue]], Producer],
        on_lost: Callable[[int], None],
        workers: int,
    ) -> None:
        """No producer until :meth:`fence`."""
        self._config_base = config
        self._id_prefix = id_prefix
        self._client_prefix = client_prefix
        self._make = make
        self._on_lost = on_lost
        self._producers: dict[int, Producer] = {}
        self._prepared: dict[int, Producer] = {}  # created ahead of a takeover, not initialised
        self._open: set[int] = set()  # partitions with a transaction begun and not committed
        self._pool = (
            ThreadPoolExecutor(workers, thread_name_prefix=f"{client_prefix}-txn")
            if workers > 0
            else None
        )
        #: Why the latest initialisation, begin or commit failed (``None`` once one succeeds).
        self.problem: str | None = None

    def transactional_id(self, partition: int) -> str:
        """The ``transactional.id`` of whoever owns ``prices[partition]`` in this relay group."""
        return f"{self._id_prefix}.{partition}"

    def _each(
        self, producers: list[tuple[int, Producer]], call: Callable[[Producer], Any]
    ) -> Iterator[tuple[int, Producer, BaseException | None]]:
        """``call`` on every producer, side by side on the pool when there are several (each
        is a round trip to the transaction coordinator); yields each one's error or ``None``."""
        futures: list[Future[Any] | None] = [None] * len(producers)
        if self._pool is not None and len(producers) > 1:
            futures = [self._pool.submit(call, producer) for _, producer in producers]
        for (partition, producer), future in zip(producers, futures, strict=True):
            try:
                if future is None:
                    call(producer)
                else:
                    future.result()
            except FENCE_ERRORS as exc:
                yield partition, producer, _cause(exc)
            else:
                yield partition, producer, None

    def fence(self, partitions: list[int], timeout_s: float) -> set[int]:
        """Give each partition a new transactional producer; return those it was given to.

        ``init_transactions`` registers a new epoch for the partition's ``transactional.id``:
        from then on the broker rejects the previous owner's producer (whichever member it
        is), and its open transaction is aborted. A partition whose initialisation failed
        (broker unreachable within ``timeout_s``) is left out: it must not be emitted on.
        """
        for partition in partitions:
            self.discard(partition)
        futures: dict[int, Future[Producer] | None] = dict.fromkeys(partitions)
        if self._pool is not None and len(partitions) > 1:
            futures = {p: self._pool.submit(self._init, p, timeout_s) for p in partitions}
        done: set[int] = set()
        for partition, future in futures.items():
            try:
                producer = self._init(partition, timeout_s) if future is None else future.result()
            except KafkaException as exc:
                self.problem = f"partition {partition}: init_transactions failed: {exc}"
                log.warning("%s", self.problem)
                continue
            self._producers[partition] = producer
            done.add(partition)
        if done:
            self.problem = None
        return done

    def _config(self, partition: int) -> dict[str, ConfigValue]:
        return {
            **self._config_base,
            "transactional.id": self.transactional_id(partition),
            "client.id": f"{self._client_prefix}-{partition}",
        }

    def prepare(self, partitions: Collection[int]) -> None:
        """Create the producers of ``partitions`` (not owned, not prepared yet) ahead of their
        takeover, so that they connect meanwhile (see the module docstring)."""
        for partition in partitions:
            if partition not in self._producers and partition not in self._prepared:
                self._prepared[partition] = self._make(self._config(partition))

    def unprepare(self, keep: Collection[int] = ()) -> None:
        """Let go of the prepared producers of partitions not in ``keep`` (not taken over)."""
        for partition in [p for p in self._prepared if p not in keep]:
            _abandon(self._prepared.pop(partition))

    def _init(self, partition: int, timeout_s: float) -> Producer:
        """A producer of the partition's ``transactional.id``, initialised.

        When the previous holder left a transaction open (it crashed mid-batch), the broker
        answers the first ``InitProducerId`` with CONCURRENT_TRANSACTIONS while it aborts that
        transaction, and librdkafka asks again only after a fixed 500 ms. A fresh producer
        asks at once: so each attempt gets :data:`_INIT_ATTEMPT_S`, then is let go and a new
        one tries, until ``timeout_s``. (A takeover after a crash measured 0.58 s of
        initialisation with one producer.) An attempt let go has had its answer, so it sends
        nothing more; should one still land late, it only fences this producer, whose next
        write then fails and the partition starts over: never two writers.
        """
        deadline = time.monotonic() + timeout_s
        config = self._config(partition)
        prepared = self._prepared.pop(partition, None)
        while True:
            producer = prepared or self._make(config)
            prepared = None
            left = deadline - time.monotonic()
            try:
                producer.init_transactions(max(0.01, min(_INIT_ATTEMPT_S, left)))
            except KafkaException as exc:
                _abandon(producer)
                del producer  # destroyed here: its retry timer must not fire later
                if not exc.args[0].retriable() and exc.args[0].code() != KafkaError._TIMED_OUT:
                    raise
                if time.monotonic() >= deadline:
                    raise
                continue
            return producer

    def begin(self, partition: int) -> Producer | None:
        """The partition's producer, in a transaction (``None``: it has none, or lost it)."""
        producer = self._producers.get(partition)
        if producer is None or partition in self._open:
            return producer
        try:
            producer.begin_transaction()
        except FENCE_ERRORS as exc:
            self._lost(partition, f"begin_transaction failed: {_cause(exc)}")
            return None
        self._open.add(partition)
        return producer

    def commit_open(self) -> set[int]:
        """Commit every open transaction; return the partitions whose commit failed.

        Every partition's records are flushed first, in this thread (delivery callbacks run
        here); then the commits run side by side, so a batch over several partitions costs
        one commit's latency, not their sum.
        """
        flushed = []
        failed: set[int] = set()
        for partition in sorted(self._open):
            producer = self._producers[partition]
            try:
                producer.flush(COMMIT_TIMEOUT_S)  # a fenced producer raises here
            except FENCE_ERRORS as exc:
                self._lost(partition, f"the transaction was not flushed: {_cause(exc)}")
                failed.add(partition)
                continue
            flushed.append((partition, producer))
        self._open.clear()
        for partition, _, err in self._each(
            flushed, lambda pr: pr.commit_transaction(COMMIT_TIMEOUT_S)
        ):
            if err is not None:
                self._lost(partition, f"the transaction was not committed: {err}")
                failed.add(partition)
        return failed

    def lose(self, partition: int, why: str) -> None:
        """``partition``'s producer failed outside this class (a record refused)."""
        self._lost(partition, why)

    def _lost(self, partition: int, why: str) -> None:
        """End the partition's producer (fenced, or the broker did not answer): start over."""
        self.problem = f"partition {partition}: {why}"
        log.warning("%s; the partition is started over", self.problem)
        self.discard(partition)
        self._on_lost(partition)

    def holds(self, partition: int) -> bool:
        """Whether ``partition`` has a producer of its own (it is lost once fenced or failed)."""
        return partition in self._producers

    def discard(self, partition: int) -> None:
        """End the partition's producer, if it has one (its term there is over)."""
        self._open.discard(partition)
        producer = self._producers.pop(partition, None)
        if producer is not None:
            _abandon(producer)

    def close(self) -> None:
        """Commit what is open, then end every producer."""
        self.commit_open()
        for partition in list(self._producers):
            self.discard(partition)
        self.unprepare()
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def _cause(exc: BaseException) -> BaseException:
    """The fatal error behind a SystemError (see :data:`FENCE_ERRORS`), else ``exc``."""
    if isinstance(exc, SystemError) and isinstance(exc.__cause__, KafkaException):
        return exc.__cause__
    return exc


def _abandon(producer: Producer) -> None:
    """Let a transactional producer go without waiting on it (it may be fenced: a flush or an
    abort could wait for an answer the broker never sends)."""
    try:
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.poll(0)
    except (*FENCE_ERRORS, RuntimeError) as exc:
        log.debug("abandoning a producer: %s", exc)
