"""A publisher member's counters, and one partition's share of a batch of output.

:class:`Share` is how the quote worker (:mod:`.quote_worker`) knows when a quote position may be
committed: the prices and dead letters produced for a partition's quotes in one batch count down
as they are acknowledged (or, for dead letters, settled), and a failed price fails the share
(its quotes are replayed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message

from pricing_ha.kafka.replay_backoff import is_permanent

__all__ = ["PublisherStats", "Share"]


@dataclass
class PublisherStats:
    """Counters of one member (read by status and metrics)."""

    priced: int = 0
    dead_lettered: int = 0
    not_leader_skips: int = 0
    delivery_failures: int = 0  # records the broker refused or that expired
    flush_timeouts: int = 0  # batches replayed because output was still unacknowledged
    producer_replacements: int = 0  # wedged price producers replaced (their batches replayed)
    seq_gaps: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)


class Share:
    """One partition's share of a batch: its quote offsets and prices not yet acknowledged.

    Its :meth:`delivered` is the delivery callback of every record the share produced (one
    object per share, not a closure per record): :attr:`on_delivery`, bound once, so that the
    producer recognises it and wraps it once
    (:meth:`pricing_ha.kafka.producers.ReplaceableProducer.produce`).
    """

    __slots__ = ("failed", "first", "last", "on_delivery", "outstanding", "permanent", "stats")

    def __init__(self, first: int, stats: PublisherStats) -> None:
        self.first = first
        self.last = first
        self.outstanding = 0
        self.failed = False
        self.permanent = False  # a failure that a replay will meet again (backed off)
        self.stats = stats
        self.on_delivery: Callable[[KafkaError | None, Message], None] = self.delivered

    def delivered(self, err: KafkaError | None, _msg: Message) -> None:
        """Count one record settled; an error fails the share (its quotes are replayed)."""
        self.outstanding -= 1
        if err is not None:
            # Counted and logged (rate-limited) by the ReplaceableProducer, not per record.
            self.failed = True
            self.permanent = self.permanent or is_permanent(err)
            self.stats.delivery_failures += 1

    def settled(self) -> None:
        """Count one dead letter settled (delivered or given up: its quote is done with)."""
        self.outstanding -= 1
