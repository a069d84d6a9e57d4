"""``pricing-ha status``: who leads what, in every group sharing the NELI topic, and how fresh.

Every NELI member names the partitions it leads in each heartbeat, so reading the NELI topic
for a couple of pulses shows every live member of every group (publishers p1, p2 and the relay)
as it reports itself. No broker-side group description is needed (the embedded broker lacks it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from neli import Heartbeat, HeartbeatDecodeError
from pricing_ha.config import AppConfig
from pricing_ha.kafka.topics import fetch_metadata


@dataclass(frozen=True)
class MemberStatus:
    """The latest heartbeat of one member."""

    group: str
    member: str
    led: tuple[int, ...]
    age_s: float


def read_status(cfg: AppConfig, window_s: float = 2.0) -> list[MemberStatus]:
    """Read the NELI topic for ``window_s`` and return the latest state of each member seen."""
    topic = cfg.topics.neli
    consumer = Consumer(
        cfg.broker.client_config(
            defaults={"log.connection.close": False},
            required={"group.id": "pricing-ha-status", "enable.auto.commit": False},
        )
    )
    try:
        md = fetch_metadata(
            consumer, cfg.broker.bootstrap_servers, cfg.broker.connect_timeout_ms / 1000
        )
        meta = md.topics.get(topic)
        count = len(meta.partitions) if meta is not None and meta.partitions else 0
        consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(count)])
        latest: dict[str, Heartbeat] = {}
        deadline = time.monotonic() + window_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            try:
                hb = Heartbeat.decode(msg.value())
            except HeartbeatDecodeError:
                continue
            seen = latest.get(hb.member_id)
            if seen is None or hb.sent_wall >= seen.sent_wall:
                latest[hb.member_id] = hb
    finally:
        consumer.close()
    now = time.time()
    return sorted(
        (
            MemberStatus(hb.group, hb.member_name, hb.led, max(0.0, now - hb.sent_wall))
            for hb in latest.values()
        ),
        key=lambda m: (m.group, m.member),
    )


def render(members: list[MemberStatus], partitions: int) -> str:
    """A table per group: members, led partitions, and which partitions nobody leads."""
    if not members:
        return "no NELI member has heartbeated during the window"
    lines: list[str] = []
    for group in sorted({m.group for m in members}):
        lines.append(f"group {group}")
        covered: set[int] = set()
        for m in (m for m in members if m.group == group):
            covered |= set(m.led)
            led = ",".join(map(str, m.led)) or "-"
            lines.append(f"  {m.member:<28} leads {led:<20} last heartbeat {m.age_s:5.2f} s ago")
        missing = sorted(set(range(partitions)) - covered)
        lines.append(f"  unled partitions: {missing or 'none'}")
    return "\n".join(lines)
