"""Which member of group G owns key K now, and since when: answered from NELI heartbeats.

Every NELI heartbeat names the partitions its sender leads at the moment it is sent
(``Heartbeat.led``), its group and member, and the sender's wall clock. A reader of the NELI
topic that is not a member of any group (manual assignment of every partition, from the end)
can therefore say, per group and partition, which members claimed leadership in their latest
heartbeats, and since when without a break. No extra topic and no extra traffic: the members
already publish these heartbeats.

Staleness bound
---------------
A claim is the sender's statement *at send time*. Leadership can end right after a heartbeat
(a crash, a pause, a revocation), so an answer can name a member that stopped leading up to
the age of its latest heartbeat + e ago (e: wall-clock skew between the sender and this
reader). A claim not renewed for ``max_age_s`` is dropped, so that age is at most
``max_age_s``; :class:`OwnerLookup` uses three pulse intervals, so that one or two lost
heartbeats do not hide an owner. A new owner shows up one pulse plus the delivery delay after
it starts leading. In non-exclusive mode two members may legitimately be named for a while
(the overlap NELI allows). Act on the answer only as a routing hint: the member itself checks
:meth:`neli.Neli.leads` before acting.

Since when
----------
``since_wall`` is the send time of the first heartbeat of the owner's current unbroken run of
claims *that this reader saw*. A reader that started at ``observed_from_wall`` cannot see
further back: an owner whose run began within ``max_age_s`` of that instant may have been
leading before it (:meth:`OwnerDirectory.since_is_exact` says which).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from neli._heartbeat import Heartbeat, HeartbeatDecodeError
from neli._rejections import Rejections
from neli._roles import role_partition

__all__ = ["Owner", "OwnerDirectory", "OwnerLookup"]


@dataclass(frozen=True, slots=True)
class Owner:
    """A member that claims to lead a partition.

    Attributes:
        member_id: the member's unique id.
        member_name: its human-readable name.
        since_wall: send time of the first heartbeat of its current unbroken run of claims.
        last_seen_wall: send time of its latest heartbeat claiming the partition.
    """

    member_id: str
    member_name: str
    since_wall: float
    last_seen_wall: float


class OwnerDirectory:
    """The claims of every group's members, fed with heartbeats (pure; no I/O; thread-safe).

    Args:
        partitions: M, the NELI topic's partition count (keys map to ``murmur2(key) mod M``).
        max_age_s: a claim not renewed for this long is dropped (see the module docstring).
        observed_from_wall: the reader's wall time when it started reading heartbeats, if it
            read from then on (the end of the topic); ``None``: claims are exact as fed.
    """

    def __init__(
        self, partitions: int, max_age_s: float, *, observed_from_wall: float | None = None
    ) -> None:
        """Start with no claims."""
        self.partitions = partitions
        self.max_age_s = max_age_s
        self.observed_from_wall = observed_from_wall
        # (group, partition) -> member id -> its claim
        self._claims: dict[tuple[str, int], dict[str, Owner]] = {}
        self._lock = threading.Lock()

    def observe(self, hb: Heartbeat) -> None:
        """Record one heartbeat (any partition it was read from; duplicates are harmless)."""
        with self._lock:
            for p in hb.led:
                claims = self._claims.setdefault((hb.group, p), {})
                old = claims.get(hb.member_id)
                if old is not None and hb.sent_wall <= old.last_seen_wall:
                    continue  # a copy of a heartbeat already seen (full NELI sends M copies)
                fresh = old is None or hb.sent_wall - old.last_seen_wall > self.max_age_s
                since = hb.sent_wall if fresh or old is None else old.since_wall
                claims[hb.member_id] = Owner(hb.member_id, hb.member_name, since, hb.sent_wall)
            # A heartbeat that no longer lists a partition ends the sender's claim on it.
            for (group, p), claims in self._claims.items():
                if group == hb.group and p not in hb.led:
                    old = claims.get(hb.member_id)
                    if old is not None and old.last_seen_wall < hb.sent_wall:
                        del claims[hb.member_id]

    def prune(self, now_wall: float) -> None:
        """Forget claims older than ``max_age_s`` at ``now_wall``: anyone may write heartbeats
        naming new members, so claims that are no longer answered must not pile up."""
        with self._lock:
            for key in list(self._claims):
                claims = self._claims[key]
                for member in [
                    m for m, o in claims.items() if now_wall - o.last_seen_wall > self.max_age_s
                ]:
                    del claims[member]
                if not claims:
                    del self._claims[key]

    def partition_owners(self, group: str, partition: int, now_wall: float) -> list[Owner]:
        """The members of ``group`` claiming ``partition`` now, longest-standing first."""
        with self._lock:
            claims = self._claims.get((group, partition), {})
            live = [o for o in claims.values() if now_wall - o.last_seen_wall <= self.max_age_s]
        return sorted(live, key=lambda o: (o.since_wall, o.member_id))

    def owners(self, group: str, key: str | bytes, now_wall: float) -> list[Owner]:
        """The members of ``group`` that own ``key`` now (the leaders of its partition)."""
        return self.partition_owners(group, role_partition(key, self.partitions), now_wall)

    def groups(self) -> set[str]:
        """Every group a heartbeat with a claim has been seen from."""
        with self._lock:
            return {group for group, _ in self._claims}

    def since_is_exact(self, owner: Owner) -> bool:
        """Whether ``owner.since_wall`` is when its run began, not just when reading began."""
        if self.observed_from_wall is None:
            return True
        return owner.since_wall - self.observed_from_wall > self.max_age_s


class OwnerLookup:
    """An :class:`OwnerDirectory` kept current by a background reader of the NELI topic.

    Args:
        bootstrap_servers: Kafka bootstrap servers.
        topic: the NELI topic.
        pulse_interval_ms: the members' pulse; ``max_age_s`` is three pulses.
        wall: the reader's wall clock (injectable for tests).
        kafka: extra librdkafka settings for the reader (TLS, SASL, ...).
        max_future_ms: heartbeats sent (by their own account) more than this ahead of ``wall``
            are refused, like a member refuses them (``NeliConfig.max_future_ms``).

    Records that are not acceptable heartbeats are refused and counted
    (:attr:`heartbeats_rejected`), never raised.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        pulse_interval_ms: int = 300,
        wall: Callable[[], float] = time.time,
        kafka: dict[str, str] | None = None,
        max_future_ms: int = 1000,
    ) -> None:
        """Create the reader; nothing connects until :meth:`start`."""
        self._settings = {
            **(kafka or {}),
            "bootstrap.servers": bootstrap_servers,
            # Never joins: manual assignment. The id only names the client in broker logs.
            "group.id": f"owner-lookup-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
        self._topic = topic
        self._max_age_s = 3 * pulse_interval_ms / 1000
        self._wall = wall
        self._max_future_s = max_future_ms / 1000
        self._rejections = Rejections(f"owner lookup of {topic}")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.directory: OwnerDirectory | None = None

    async def start(self) -> None:
        """Read the topic's partition count and start following it from the end."""
        consumer = Consumer(self._settings)
        meta = await asyncio.to_thread(consumer.list_topics, self._topic, 10)
        partitions = len(meta.topics[self._topic].partitions)
        self.directory = OwnerDirectory(
            partitions, self._max_age_s, observed_from_wall=self._wall()
        )
        consumer.assign([TopicPartition(self._topic, p, OFFSET_END) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, args=(consumer,), daemon=True)
        self._thread.start()

    @property
    def heartbeats_rejected(self) -> Mapping[str, int]:
        """Records read and refused, per reason (see :class:`neli.wire.HeartbeatDecodeError`)."""
        return self._rejections.by_reason()

    def _run(self, consumer: Consumer) -> None:
        directory = self.directory
        assert directory is not None
        pruned = self._wall()
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.1)
                now = self._wall()
                if now - pruned > directory.max_age_s:
                    directory.prune(now)
                    pruned = now
                if msg is None or msg.error() is not None:
                    continue
                try:
                    hb = Heartbeat.decode(
                        msg.value(),
                        not_after_wall=now + self._max_future_s,
                        partitions=directory.partitions,
                    )
                except HeartbeatDecodeError as exc:
                    where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
                    self._rejections.refuse(exc.reason, where, str(exc))
                    continue
                directory.observe(hb)
        finally:
            consumer.close()

    def owners(self, group: str, key: str | bytes) -> list[Owner]:
        """Who in ``group`` owns ``key`` now (see the staleness bound in the module docstring)."""
        assert self.directory is not None, "start() first"
        return self.directory.owners(group, key, self._wall())

    async def close(self) -> None:
        """Stop reading."""
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
