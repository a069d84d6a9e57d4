"""What a member sends: its heartbeats, one pulse every ``pulse_interval_ms``.

Full NELI heartbeats every partition of the topic; the fast variant heartbeats only the
partitions assigned to this member, tagged with their incarnation so that only its own current
heartbeats refresh it. Every heartbeat names the partitions the sender leads at that instant and
carries the merged mapping of the meta providers (for example a leadership term's trace context).
Heartbeats carry the producer's wall clock as their timestamp: exclusive mode judges freshness by
publish time, not by when a record happened to be read. The fast variant tells the tracker what it
sends (partition, counter, monotonic send time) before sending it: a heartbeat in this member's
name that it did not send (a forgery) never counts as its own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from neli._clock import Clock
from neli._config import NeliConfig, Variant
from neli._heartbeat import Heartbeat
from neli._heartbeat_check import MAX_HEARTBEAT_BYTES
from neli._tracker import LeadershipTracker

log = logging.getLogger("neli")

MetaProvider = Callable[[], Mapping[str, Any]]


class HeartbeatSender:
    """Publishes one member's heartbeats.

    Args:
        config: the member's configuration.
        member_id: the member's unique id.
        tracker: the member's tracker (read for leadership, assignment and incarnations).
        lock: the lock guarding ``tracker``.
        clock: the member's clock.
        producer: the producer heartbeats go through.
        partitions: M, the topic's partition count.
        meta: the meta providers; the list is shared with the member, which may add to it.
    """

    def __init__(
        self,
        *,
        config: NeliConfig,
        member_id: str,
        tracker: LeadershipTracker,
        lock: threading.Lock,
        clock: Clock,
        producer: Producer,
        partitions: int,
        meta: list[MetaProvider],
    ) -> None:
        """Create a sender; nothing is sent until :meth:`run`."""
        self._config = config
        self._member_id = member_id
        self._tracker = tracker
        self._lock = lock
        self._clock = clock
        self._producer = producer
        self._partitions = partitions
        self._meta = meta
        self._counter = 0
        #: Heartbeats that could not be queued or were not delivered.
        self.errors = 0
        self._oversized = False

    async def run(self) -> None:
        """Pulse forever (until cancelled)."""
        interval = self._config.pulse_interval_ms / 1000
        while True:
            self.pulse()
            await asyncio.sleep(interval)

    def pulse(self) -> None:
        """Queue one heartbeat to every target partition and serve delivery reports."""
        cfg, tracker = self._config, self._tracker
        now_mono, now_wall = self._clock.monotonic(), self._clock.wall()
        with self._lock:
            led = tuple(sorted(tracker.led(now_mono, now_wall)))
            if cfg.variant is Variant.FULL:
                targets: list[tuple[int, int, float | None]] = [
                    (p, 0, None) for p in range(self._partitions)
                ]
            else:
                targets = [
                    (p, tracker.incarnation(p) or 0, tracker.since(p)) for p in tracker.assigned()
                ]
            first = self._counter + 1
            self._counter += len(targets)
            if cfg.variant is Variant.FAST:
                # Before it can come back: only what this member sent proves it owns a partition.
                for i, (partition, _, _) in enumerate(targets):
                    tracker.sent(partition, first + i, now_mono)
        meta: dict[str, Any] = {}
        for provider in self._meta:
            meta.update(provider())
        for i, (partition, incarnation, since) in enumerate(targets):
            hb = Heartbeat(
                group=cfg.group_id,
                member_id=self._member_id,
                member_name=cfg.member_name,
                incarnation=incarnation,
                counter=first + i,
                sent_mono=now_mono,
                sent_wall=now_wall,
                led=led,
                meta=meta,
                since=since,
            )
            value = hb.encode()
            if len(value) > MAX_HEARTBEAT_BYTES and not self._oversized:
                self._oversized = True  # said once: it is the same every pulse
                log.error(
                    "neli heartbeat of %d bytes exceeds the %d every reader accepts: it will be "
                    "refused (too many led partitions or too much meta)",
                    len(value),
                    MAX_HEARTBEAT_BYTES,
                )
            try:
                self._producer.produce(
                    cfg.topic,
                    value=value,
                    partition=partition,
                    timestamp=int(now_wall * 1000),
                    on_delivery=self._on_delivery,
                )
            except BufferError:
                self.errors += 1
        self._producer.poll(0)

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.errors += 1
            log.debug("heartbeat not delivered: %s", err)
