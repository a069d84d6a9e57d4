"""The demo's live view: reads the NELI topic and ``prices`` as they are written.

A background thread keeps, per NELI member, its latest heartbeat (so: who leads what, in every
group, as each member reports it) and, per instrument, what arrived on ``prices`` (count, last
seq, duplicates, gaps, last arrival, and which relay wrote it). :meth:`LiveView.state` is that at
one instant, for :mod:`pricing_ha.local.demo_screen` to draw.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from neli.wire import Heartbeat, HeartbeatDecodeError
from pricing_ha.kafka.headers import header_dict
from pricing_ha.local.demo_screen import InstrumentLine, ViewState
from pricing_ha.local.seqs import value_epoch, value_seq


@dataclass
class _Line:
    count: int = 0
    last_seq: int = 0
    last_epoch: int = 0
    duplicates: int = 0
    gaps: int = 0
    last_arrival: float = 0.0
    relay: str = ""


class LiveView:
    """Follows ``neli_topic`` (from its end) and ``prices_topic`` (from the beginning, or from
    its end with ``prices_from_end``)."""

    def __init__(
        self,
        bootstrap: str,
        neli_topic: str,
        prices_topic: str,
        partitions: int,
        *,
        prices_from_end: bool = False,
    ) -> None:
        """Start following; call :meth:`close` when done.

        ``prices_from_end`` suits a caller that wants leadership only, on a ``prices`` holding
        much history: one consumer reads both topics, and reading a long backlog of ``prices``
        first would hold the heartbeats back (a benchmark with 1M records preloaded saw no
        leaders for 45 s).
        """
        self.partitions = partitions
        self._lock = threading.Lock()
        self._members: dict[str, Heartbeat] = {}
        self._lines: dict[str, _Line] = {}
        self._relayed = 0
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"demo-view-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 20,
                "log.connection.close": False,
            }
        )
        self._neli_topic, self._prices_topic = neli_topic, prices_topic
        self._consumer.assign(
            [TopicPartition(neli_topic, p, OFFSET_END) for p in range(partitions)]
            + [
                TopicPartition(prices_topic, p, OFFSET_END if prices_from_end else OFFSET_BEGINNING)
                for p in range(partitions)
            ]
        )
        self._thread = threading.Thread(target=self._run, name="demo-view", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop following."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for msg in self._consumer.consume(500, 0.1):
                    if msg.error() is not None:
                        continue
                    if msg.topic() == self._neli_topic:
                        self._on_heartbeat(msg.value())
                    else:
                        self._on_price(msg.key(), msg.value(), header_dict(msg.headers()))
        finally:
            self._consumer.close()

    def _on_heartbeat(self, value: str | bytes | None) -> None:
        try:
            raw = value.encode() if isinstance(value, str) else value
            hb = Heartbeat.decode(raw, not_after_wall=time.time() + 1.0)  # as members refuse
        except HeartbeatDecodeError:
            return
        with self._lock:
            seen = self._members.get(hb.member_id)
            if seen is None or hb.sent_wall >= seen.sent_wall:
                self._members[hb.member_id] = hb

    def _on_price(
        self, key: str | bytes | None, value: bytes | None, headers: dict[str, str]
    ) -> None:
        seq = value_seq(key, value)  # from the value: a control record has none
        if key is None or seq is None:
            return
        instrument = key.decode() if isinstance(key, bytes) else key
        epoch = value_epoch(value)  # a restarted feed numbers from 1 again, in a later epoch
        with self._lock:
            self._relayed += 1
            line = self._lines.setdefault(instrument, _Line())
            if (epoch, seq) <= (line.last_epoch, line.last_seq):
                line.duplicates += 1
                return
            base = line.last_seq if epoch == line.last_epoch else 0
            if line.last_seq and seq > base + 1:
                line.gaps += seq - base - 1
            line.count += 1
            line.last_seq, line.last_epoch = seq, epoch
            line.last_arrival = time.monotonic()
            line.relay = headers.get("relay", "")

    def active_relay(self) -> str | None:
        """The relay member that wrote the most recent price."""
        with self._lock:
            lines = [ln for ln in self._lines.values() if ln.relay]
            return max(lines, key=lambda ln: ln.last_arrival).relay if lines else None

    def last_heartbeats(self) -> dict[str, dict[str, object]]:
        """Per NELI member id: its name, group and the send time of its latest heartbeat.

        Heartbeats are published every pulse whatever the member does, so this, not any span
        (price-path spans are sampled), is when a member was last heard of.
        """
        with self._lock:
            return {
                member_id: {
                    "member_name": hb.member_name,
                    "group": hb.group,
                    "sent_wall_ns": int(hb.sent_wall * 1e9),
                    "led": sorted(hb.led),
                }
                for member_id, hb in self._members.items()
            }

    def leaders(self, group: str) -> dict[int, list[str]]:
        """Partition -> members of ``group`` (NELI group id) that report leading it now."""
        now = time.time()
        out: dict[int, list[str]] = {p: [] for p in range(self.partitions)}
        with self._lock:
            for hb in self._members.values():
                if hb.group == group and now - hb.sent_wall < 2.0:
                    for p in hb.led:
                        out.setdefault(p, []).append(hb.member_name.split("/")[-1])
        return out

    def state(self, groups: dict[str, str], elapsed_s: float) -> ViewState:
        """What the view shows now: leadership of each group (label -> NELI group id), then the
        instruments on ``prices`` (drawn by :mod:`pricing_ha.local.demo_screen`)."""
        leaders = {label: self.leaders(group) for label, group in groups.items()}
        now = time.monotonic()
        with self._lock:
            lines = [
                InstrumentLine(
                    name,
                    ln.last_seq,
                    now - ln.last_arrival if ln.last_arrival else None,
                    ln.duplicates,
                    ln.gaps,
                    ln.relay,
                )
                for name, ln in sorted(self._lines.items())
            ]
            relayed = self._relayed
        return ViewState(elapsed_s, leaders, relayed, lines)
