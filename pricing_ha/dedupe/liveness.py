"""Which relay members are alive, and which claim each partition: from their NELI heartbeats.

Every relay member already sends NELI heartbeats (every ``pulse_interval_ms``) on the NELI
topic, each naming its group, its member id and the partitions it leads (``led``). A member's
:class:`LivenessReader` follows every partition of that topic from its end and feeds
:class:`Liveness` with each heartbeat of its own relay group *as it is received* (this
process's monotonic clock: no wall-clock skew between hosts enters the answers). From that:

* the **live members**: those whose latest heartbeat was received within a bound (the
  takeover detector's threshold D): the candidates for succeeding a silent owner
  (:func:`pricing_ha.dedupe.detector.successor`);
* per partition, when a heartbeat claiming it was last received: a member that leads the
  partition and sends heartbeats is alive, even while the partition has no input;
* this member's **own view**: its own heartbeats coming back show that its connection to the
  broker and its reader are working. An answer about somebody else's silence is only worth
  something while that holds, and it must have held for at least D (:meth:`Liveness.fresh_since`):
  a member that was cut off, paused or behind sees everybody silent at once.

The heartbeats are NELI's own; reading them costs one consumer per relay member and no extra
traffic. Records that are not acceptable heartbeats are refused and counted, never raised.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from neli.wire import Heartbeat, HeartbeatDecodeError
from pricing_ha.kafka.fetching import FETCH_WAIT_MS

__all__ = ["Liveness", "LivenessReader"]

log = logging.getLogger("pricing_ha.relay")

_NEVER = float("-inf")
_RETRY_FIRST_S = 0.5  # a failed reader session is started again after this, doubling
_RETRY_MAX_S = 5.0


class Liveness:
    """Heartbeats of one relay group as received, and what they say (thread-safe; no I/O).

    Args:
        group: the relay's NELI group id (heartbeats of other groups are ignored).
        me: this member's NELI member id (:attr:`neli.Neli.member_id`).
        within_s: own heartbeats at most this far apart make an unbroken run (the
            detector's threshold D: :meth:`fresh_since`).
        forget_s: members and claims not heard of for this long are forgotten.
    """

    def __init__(self, group: str, me: str, within_s: float, *, forget_s: float = 30.0) -> None:
        """Nothing heard yet."""
        self.group = group
        self.me = me
        self._forget_s = forget_s
        self._lock = threading.Lock()
        self._members: dict[str, float] = {}  # member id -> latest heartbeat received (mono)
        self._claims: dict[int, dict[str, float]] = {}  # partition -> member -> received
        self._own_last = _NEVER
        self._own_since = _NEVER  # start of the current unbroken run of own heartbeats
        self.within_s = within_s

    def observe(self, hb: Heartbeat, received: float) -> None:
        """One heartbeat, received at monotonic ``received`` (copies are harmless)."""
        if hb.group != self.group:
            return
        with self._lock:
            self._members[hb.member_id] = max(received, self._members.get(hb.member_id, _NEVER))
            for partition in hb.led:
                self._claims.setdefault(partition, {})[hb.member_id] = received
            for partition, claims in self._claims.items():
                if partition not in hb.led:
                    claims.pop(hb.member_id, None)
            if hb.member_id == self.me:
                if received - self._own_last > self.within_s:
                    self._own_since = received
                self._own_last = received

    def live(self, within_s: float, now: float) -> list[str]:
        """Members heard from within ``within_s`` (this member included when it is), sorted."""
        with self._lock:
            stale = [m for m, t in self._members.items() if now - t > self._forget_s]
            for member in stale:
                del self._members[member]
            return sorted(m for m, t in self._members.items() if now - t <= within_s)

    def claimed_at(self, partition: int) -> float:
        """When a heartbeat of another member claiming ``partition`` was last received
        (``-inf``: none)."""
        with self._lock:
            claims = self._claims.get(partition, {})
            return max((t for m, t in claims.items() if m != self.me), default=_NEVER)

    def fresh_since(self, now: float) -> float | None:
        """Since when this member's own heartbeats have come back at least every
        ``within_s`` without a break, or ``None`` if the latest is older than that."""
        with self._lock:
            if now - self._own_last > self.within_s:
                return None
            return self._own_since


class LivenessReader:
    """Follows the NELI topic in a thread of its own and feeds a :class:`Liveness`.

    Args:
        settings: the reader's consumer settings (broker, security); it never joins a group.
        topic: the NELI topic.
        liveness: what it feeds.
        consumer: builds the consumer (tests pass a fake).
    """

    def __init__(
        self,
        settings: dict[str, Any],
        topic: str,
        liveness: Liveness,
        *,
        consumer: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        """Create the reader; nothing is read until :meth:`start`."""
        # Never joins a group (manual assignment) nor commits: the id only names the client,
        # under the relay role's standby prefix (pricing_ha.security.roles).
        self._settings = {
            **settings,
            "group.id": f"relay-standby-liveness-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            # Apache Kafka answers a waiting fetch as soon as a record arrives, so the wait
            # only sets how often an idle reader asks (pricing_ha.kafka.fetching).
            "fetch.wait.max.ms": FETCH_WAIT_MS,
        }
        self._topic = topic
        self.liveness = liveness
        self._make = consumer or (lambda s: Consumer(s, logger=log))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relay-liveness", daemon=True)
        self.rejected = 0
        #: The failure of the current session, until a new session follows the topic again.
        self.error: Exception | None = None
        self.restarts = 0

    def start(self) -> None:
        """Start following the topic from its end."""
        self._thread.start()

    def close(self) -> None:
        """Stop reading (the consumer is closed by the thread)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def problem(self) -> str | None:
        """Why the reader is not following the topic now, or ``None`` (a readiness detail:
        while it is down the detector suspects nobody, so crashes wait for the group)."""
        error = self.error
        if error is None:
            return None
        return f"the liveness reader of {self._topic} is down ({self.restarts} restarts): {error}"

    def _run(self) -> None:
        backoff = _RETRY_FIRST_S
        while not self._stop.is_set():
            try:
                self._follow()
            except Exception as exc:  # noqa: BLE001 - whatever ends a session, start another
                self.error = exc
                self.restarts += 1
                log.warning(
                    "the relay's liveness reader of %s failed (restarting in %.1f s): %s",
                    self._topic,
                    backoff,
                    exc,
                )
            else:
                return
            self._stop.wait(backoff)
            backoff = min(2 * backoff, _RETRY_MAX_S)

    def _follow(self) -> None:
        """One session: a consumer from the topic's end until :meth:`close` (or a failure)."""
        consumer = self._make(self._settings)
        try:
            meta = consumer.list_topics(self._topic, 10)
            count = len(meta.topics[self._topic].partitions)
            if count == 0:
                raise RuntimeError(f"the broker lists no partitions of {self._topic}")
            consumer.assign([TopicPartition(self._topic, p, OFFSET_END) for p in range(count)])
            self.error = None
            while not self._stop.is_set():
                for msg in consumer.consume(100, 0.05):
                    if msg.error() is None:
                        self._observe(msg.value(), count)
        finally:
            consumer.close()

    def _observe(self, value: bytes | None, partitions: int) -> None:
        now = time.monotonic()
        try:
            # Wall-clock plausibility is NELI's business; only the receive time is used here.
            hb = Heartbeat.decode(value or b"", not_after_wall=float("inf"), partitions=partitions)
        except HeartbeatDecodeError:
            self.rejected += 1
            return
        self.liveness.observe(hb, now)
