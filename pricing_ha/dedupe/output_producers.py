"""The relay's producers to ``prices``, and what their delivery reports say.

Everything a relay member writes goes through :class:`OutputProducers`: its prices
(:mod:`.output`), its control records (:mod:`.control_writer`) and its dead letters. The same
object reads the delivery reports: which partitions have output that was not acknowledged, and
when the member's own records were appended (:meth:`OutputProducers.read_as_of`, a hand-over's
read-back evidence).

**Fencing**: each owned partition is written by a transactional producer of its own
(:class:`~pricing_ha.dedupe.fences.Fences`); a takeover marker is written only after
``init_transactions`` fenced the previous owner, prices are emitted inside transactions
committed at the end of each batch and when idle, and a partition whose transaction fails is
started over. Probes and ticks go through the relay's one idempotent producer; dead letters
through :attr:`OutputProducers.dead_letters`, a producer of their own with the rule every role
shares (:mod:`pricing_ha.kafka.dead_letter`), so a dead-letter topic that refuses records never
fails or replays prices.

A producer that a delivery error shows to be finished
(:func:`~pricing_ha.kafka.producers.producer_is_wedged`: a fatal error, or records timed out
while the broker was paused, so the idempotent producer bumped its epoch) is replaced at the
end of the batch (:class:`~pricing_ha.kafka.producers.ReplaceableProducer`). Every partition
with output that failed or was purged with the old producer is reported failed, so the relay
starts it over (rebuild from ``prices``, re-read ``prices.raw`` from the last commit), but only
once the broker has answered the new producer (:meth:`OutputProducers.may_resume`): a rebuild
against a broker that does not answer would find ``prices`` empty.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.fences import Fences
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.kafka.dead_letter import DeadLetters
from pricing_ha.kafka.producers import PRODUCER_DEFAULTS, ConfigValue, ReplaceableProducer
from pricing_ha.kafka.replay_backoff import ReplayBackoff, is_permanent
from pricing_ha.member.worker import FLUSH_TIMEOUT_S

__all__ = ["OutputProducers"]

log = logging.getLogger("pricing_ha.relay")

_PROBE_TIMEOUT_S = 0.1  # one metadata request asking whether the broker answers again
_APPENDED_KEPT = 256  # acknowledged records remembered per partition, for read_as_of
_APPENDED_EVERY_S = 0.01  # at most one per this interval
#: linger.ms of the relay's producers. Each batch ends in a flush (or a commit, which flushes),
#: and a flush sends at once whatever linger.ms says, so linger costs the relay no latency. At
#: 1 ms librdkafka's broker thread spent its time polling, with few context switches, while
#: records waited (perf: poll, clock_gettime, rd_kafka_toppar_producer_serve): each relay used
#: 22-24 % of a core at 800 prices/s, 14-16 % at 10 ms.
_LINGER_MS = 10
_DLQ_CLOSE_S = 5.0  # how long a closing relay waits for its dead letters


class OutputProducers:
    """The relay's producers and their delivery reports (see the module docstring). Worker
    thread only.

    Args:
        cfg: the configuration (topics, broker, the relay's output timeout).
        member: this relay member's name.
        raw_group: the consumer group of the relay's ``prices.raw`` positions (it names the
            transactional producers).
        stats: the member's counters (delivery failures, producer replacements).
        producer_factory: builds a producer from its settings (tests and the simulation pass a
            fake).
        parallel_commits: commit the partitions' transactions side by side.
        extra_settings: added to every producer's settings (e.g. librdkafka statistics).
    """

    def __init__(
        self,
        cfg: AppConfig,
        member: str,
        raw_group: str,
        *,
        stats: RelayStats,
        producer_factory: Callable[[dict[str, ConfigValue]], Producer] | None = None,
        parallel_commits: bool = True,
        extra_settings: Mapping[str, Any] | None = None,
    ) -> None:
        """Create the producers."""
        extra = dict(extra_settings or {})
        self._cfg = cfg
        self._stats = stats
        self._failed: set[int] = set()  # partitions whose output was not acknowledged
        self._permanent: set[int] = set()  # ... and of those, failed for good (not transient)
        self._replays = ReplayBackoff()
        self._resume_at = float("-inf")
        # partition -> (offset, monotonic time produced) of some acknowledged records
        self._appended: dict[int, deque[tuple[int, float]]] = {}
        self._unproven = False  # replaced, and the broker has not answered the new producer yet
        self._probed_at = float("-inf")
        message_timeout_ms = cfg.relay.output_timeout_ms
        self.fences = Fences(
            cfg.broker.client_config(
                defaults={
                    # The pipeline's producer defaults (one request in flight: see there), as
                    # the ReplaceableProducer below gets them.
                    **PRODUCER_DEFAULTS,
                    "linger.ms": _LINGER_MS,
                    "log.connection.close": False,
                    # A crashed owner's open transaction holds read_committed readers back
                    # until the next owner's init_transactions aborts it, or this timeout.
                    "transaction.timeout.ms": max(10_000, message_timeout_ms),
                },
                required={
                    "acks": "all",
                    "enable.idempotence": True,
                    "message.timeout.ms": message_timeout_ms,
                },
            )
            | extra,
            id_prefix=f"{raw_group}.{cfg.topics.prices}",
            client_prefix=f"relay-{member}-prices",
            make=producer_factory or (lambda config: Producer(config, logger=log)),
            on_lost=self._lost,
            workers=cfg.topics.partitions if parallel_commits else 0,
        )
        #: Malformed raw records' dead letters (built at the first one).
        self.dead_letters = DeadLetters(
            cfg.broker.client_config(
                defaults={"linger.ms": _LINGER_MS, "log.connection.close": False},
                required={
                    "client.id": f"relay-{member}-dlq",
                    "message.timeout.ms": message_timeout_ms,
                },
            ),
            topic=cfg.topics.raw_dlq,
            source_topic=cfg.topics.raw,
            identity=[("relay", member.encode())],
            logger=log,
            factory=producer_factory,
            # Looked up when called: the relay simulation replaces this module's ``time``.
            clock=lambda: time.monotonic(),  # noqa: PLW0108
            sleep=lambda s: time.sleep(s),  # noqa: PLW0108
        )
        #: The relay's one idempotent producer, for probes and ticks (replaced when wedged).
        self.producer: ReplaceableProducer[Producer] = ReplaceableProducer(
            cfg.broker.client_config(
                defaults={"linger.ms": _LINGER_MS, "log.connection.close": False},
                required={
                    "acks": "all",
                    "enable.idempotence": True,
                    "client.id": f"relay-{member}-prices",
                    "message.timeout.ms": message_timeout_ms,
                },
            )
            | extra,
            name=f"relay-{member}-prices",
            logger=log,
            factory=producer_factory,
        )

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        """The delivery report of a record produced through these producers."""
        if err is None:
            self._note_appended(msg)
            if self._replays.streaking():
                partition = msg.partition()
                if partition is not None:
                    self._replays.delivered(partition)
            return
        # Counted and logged (rate-limited) by the ReplaceableProducer, not per record.
        partition = msg.partition()
        self._stats.delivery_failures += 1
        if partition is not None:
            self._failed.add(partition)
            if is_permanent(err):
                self._permanent.add(partition)

    def _note_appended(self, msg: Message) -> None:
        """Remember (sparsely) when a record was produced that landed at an offset."""
        partition, offset = msg.partition(), msg.offset()
        if partition is None or offset is None or offset < 0:
            return
        now = time.monotonic()
        seen = self._appended.get(partition)
        if seen and now - seen[-1][1] < _APPENDED_EVERY_S:
            return  # produced no later than now: too soon after the last one kept, as below
        produced = now - (msg.latency() or 0.0)
        if seen is None:
            seen = self._appended[partition] = deque(maxlen=_APPENDED_KEPT)
        if not seen or produced - seen[-1][1] >= _APPENDED_EVERY_S:
            seen.append((offset, produced))

    def read_as_of(self, partition: int, position: int) -> float:
        """A monotonic time before which everything appended to ``prices[partition]`` is below
        ``position``: when this member produced its latest record found below it (that record
        was appended after it was produced, and after everything appended before). Minus
        infinity when there is none."""
        seen = self._appended.get(partition)
        if not seen:
            return float("-inf")
        while len(seen) > 1 and seen[1][0] < position:
            seen.popleft()
        offset, produced = seen[0]
        return produced if offset < position else float("-inf")

    def _lost(self, partition: int) -> None:
        """A partition's transaction failed (fenced, or not answered).

        Looked up at each loss: :meth:`take_failed` replaces the set, and a bound ``add`` of
        the first set, passed to the fences, kept adding to it, so every fenced commit after
        the first went unreported and the hot path committed its input past prices the broker
        had aborted: lost (a wrong suspicion, a zombie, a takeover after 0.3 s).
        """
        self._failed.add(partition)

    def take_failed(self) -> set[int]:
        """Replace a wedged producer; return (and forget) the partitions whose output failed."""
        if self.producer.replace_if_wedged() is not None:
            # The purged records' callbacks have run: their partitions are in _failed too.
            self._stats.producer_replacements = self.producer.replacements
            self._unproven = True
        failed, self._failed = self._failed, set()
        if failed:
            # Started over at once, unless output failed for good again: then not before a
            # backoff (pricing_ha.kafka.replay_backoff), so a refusing broker is not spun on.
            now = time.monotonic()
            for partition in failed:
                wait_s = self._replays.failed(partition, permanent=partition in self._permanent)
                self._resume_at = max(self._resume_at, now + wait_s)
            self._permanent.clear()
        return failed

    def mark_failed(self, partitions: set[int]) -> None:
        """Report ``partitions`` failed again at the end of the next batch."""
        self._failed |= partitions

    @property
    def problem(self) -> str | None:
        """Why output cannot be delivered now (the producer's problem), or ``None``."""
        return self.producer.problem or self.fences.problem

    def may_resume(self) -> bool:
        """Whether failed partitions may be started over: not until a replaced producer's
        broker has answered a metadata request (asked at most every ``_PROBE_TIMEOUT_S``), nor
        while backing off after output failed for good again (see :meth:`take_failed`)."""
        now = time.monotonic()
        if now < self._resume_at:
            return False  # backing off after output failed for good twice in a row
        if not self._unproven:
            return True
        if now - self._probed_at < _PROBE_TIMEOUT_S:
            return False
        self._probed_at = now
        try:
            self.producer.producer.list_topics(self._cfg.topics.prices, timeout=_PROBE_TIMEOUT_S)
        except KafkaException:
            return False
        self._unproven = False
        return True

    def close(self) -> None:
        """Commit open transactions, flush what is still queued."""
        self.fences.close()
        self.producer.close(FLUSH_TIMEOUT_S)
        # Not committed past (RelayOutput.commit_floor): whoever reads next dead-letters again.
        self.dead_letters.close(_DLQ_CLOSE_S)
