"""A local pricing deployment: unique topics, processes started as OS processes, topic reads.

Used by the demo, the integration tests and the benchmarks: :class:`PricingCluster` writes a
configuration with unique topic names, starts ``pricing-ha`` commands as supervised processes
(stopped by PID when the :class:`~pricing_ha.local.procs.ProcessGroup` closes) and reads whole
topics back so that what happened can be judged from the data.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from pricing_ha.kafka.headers import header_dict, is_control
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.seqs import value_seq
from pricing_ha.local.waiting import wait_for

#: S for local runs; tests may override with PRICING_HA_TEST_SESSION_MS (real Kafka: >= 6000).
SESSION_MS = int(os.environ.get("PRICING_HA_TEST_SESSION_MS", "3000"))


@dataclass(frozen=True)
class Record:
    """One consumed record."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]
    timestamp_ms: int

    @property
    def seq(self) -> int | None:
        """The seq of a price record, read from its value (never from a header: a publisher
        chooses its headers), or ``None`` if the record is not a keyed price."""
        return value_seq(self.key, self.value)


def read_topic(
    bootstrap: str, topic: str, partitions: int, idle_s: float = 1.5, *, live: bool = False
) -> list[Record]:
    """Everything on ``topic``, from the beginning, until nothing new arrives for ``idle_s``.

    ``live``: the topic is still being written, so it may never be idle for ``idle_s``: stop
    once every partition has been read up to its end offset as the broker reported it when
    the read began (records appended after that may be missing: for checks that poll until
    what they want has arrived).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",  # what subscribers see (the relay's transactions)
            "fetch.wait.max.ms": 50,
            "log.connection.close": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[Record] = []
    # The first fetch (offset look-up, connection) can take longer than the idle window.
    last_new = time.monotonic() + max(0.0, 1.0 - idle_s)
    try:
        todo = _ends(consumer, topic, partitions) if live else {}
        while time.monotonic() - last_new < idle_s and (todo or not live):
            batch = consumer.consume(1000, 0.2)
            for msg in batch:
                if msg.error() is not None:
                    continue
                if todo and (msg.offset() or 0) + 1 >= todo.get(msg.partition() or 0, 0):
                    todo.pop(msg.partition() or 0, None)
                key, value = msg.key(), msg.value()
                if is_control(key, msg.headers()):
                    continue  # a relay's takeover marker on prices, not a price
                headers = header_dict(msg.headers())
                out.append(
                    Record(
                        msg.partition() or 0,
                        msg.offset() or 0,
                        key.encode() if isinstance(key, str) else key,
                        value.encode() if isinstance(value, str) else value,
                        headers,
                        msg.timestamp()[1],
                    )
                )
            if batch:
                last_new = time.monotonic()
    finally:
        consumer.close()
    return out


def _ends(consumer: Consumer, topic: str, partitions: int) -> dict[int, int]:
    """Partition -> its end offset as reported now, for the partitions that have records."""
    ends = {}
    for p in range(partitions):
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        except KafkaException:
            return {}  # not known now: nothing read (the caller polls again)
        if high > low:
            ends[p] = high
    return ends


def pricing_cli() -> list[str]:
    """The ``pricing-ha`` command of this interpreter's environment."""
    exe = Path(sys.executable).with_name("pricing-ha")
    return [str(exe)] if exe.exists() else [shutil.which("pricing-ha") or "pricing-ha"]


@dataclass
class PricingCluster:
    """A configuration with unique topic names, and the processes running on it."""

    procs: ProcessGroup
    bootstrap: str
    workdir: Path
    partitions: int = 4
    #: Replicas per partition of every topic (3 on a three-node cluster: min.insync.replicas 2).
    replication_factor: int = 1
    uid: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    session_ms: int = SESSION_MS
    members: dict[str, Proc] = field(default_factory=dict)
    #: How many instruments the latest :meth:`feed` was started with.
    fed_instruments: int = 0
    #: Extra environment variables of every process (e.g. ``PRICING_HA__TELEMETRY__...``).
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Write the configuration file."""
        self.config_path = self.workdir / f"pricing-{self.uid}.toml"
        self.topics = {
            role: f"{name}-{self.uid}"
            for role, name in {
                "quotes": "md.quotes",
                "neli": "pricing.neli",
                "raw": "prices.raw",
                "prices": "prices",
                "dlq": "md.quotes.dlq",
                "raw_dlq": "prices.raw.dlq",
            }.items()
        }
        lines = ["[broker]", f'bootstrap_servers = "{self.bootstrap}"', "", "[topics]"]
        lines += [f'{role} = "{name}"' for role, name in self.topics.items()]
        lines += [f"partitions = {self.partitions}"]
        lines += [f"replication_factor = {self.replication_factor}", "", "[groups]"]
        lines += [
            f'publishing = ["{self.group("p1")}", "{self.group("p2")}"]',
            f'relay = "{self.group("relay")}"',
            "",
            "[neli]",
        ]
        lines += [
            f"session_timeout_ms = {self.session_ms}",
            f"threshold_ms = {2 * self.session_ms}",
        ]
        self.config_path.write_text("\n".join(lines) + "\n")

    def group(self, name: str) -> str:
        """A unique publishing-group name for this cluster (e.g. ``p1-<uid>``)."""
        return f"{name}-{self.uid}"

    def cli(self, name: str, *args: str, env: Mapping[str, str] | None = None) -> Proc:
        """Start ``pricing-ha ARGS --config <this cluster's file>`` as a supervised process.

        Its environment adds :attr:`env`, then ``env``.
        """
        proc = self.procs.spawn(
            name,
            [*pricing_cli(), *args, "--config", str(self.config_path)],
            env={**self.env, **(env or {})},
        )
        self.members[name] = proc
        return proc

    def create_topics(self) -> None:
        """``pricing-ha topics create``, waited for."""
        proc = self.cli("topics-create", "topics", "create")
        assert proc.wait(60) == 0, proc.log_tail()

    def publisher(self, group: str, member: str) -> Proc:
        """Start one publisher member."""
        return self.cli(
            f"{group}-{member}", "run", "--group", self.group(group), "--member", member
        )

    def relay(self, member: str) -> Proc:
        """Start one relay member (of this cluster's own relay group)."""
        return self.cli(
            f"relay-{member}", "dedupe", "--group", self.group("relay"), "--member", member
        )

    def feed(self, *, instruments: int, rate: float, duration: float) -> Proc:
        """Start the synthetic feed; its summary goes to ``feed-summary.json``."""
        self.fed_instruments = instruments
        return self.cli(
            "feed",
            "feed",
            f"--instruments={instruments}",
            f"--rate={rate}",
            f"--duration={duration}",
            f"--summary-out={self.workdir / f'feed-{self.uid}.json'}",
        )

    def feed_summary(self) -> dict[str, Any]:
        """The feed's summary file."""
        return dict(json.loads((self.workdir / f"feed-{self.uid}.json").read_text()))

    def expected(self) -> dict[str, int]:
        """Instrument -> last seq the feed produced (seqs run 1..last)."""
        summary = self.feed_summary()
        return {name: int(t["last_seq"]) for name, t in summary["instruments"].items()}

    def read(self, role: str, idle_s: float = 1.5, *, live: bool = False) -> list[Record]:
        """Everything on one of this cluster's topics (``live``: see :func:`read_topic`)."""
        return read_topic(self.bootstrap, self.topics[role], self.partitions, idle_s, live=live)

    def wait_led(self, groups: list[str], timeout: float = 90.0) -> None:
        """Wait until each named group (``p1``, ``p2``, ``relay``) leads every partition."""
        from pricing_ha.dedupe.relay import relay_group_id
        from pricing_ha.local.demo_view import LiveView
        from pricing_ha.publishing.publisher import neli_group_id

        ids = [
            relay_group_id(self.group(g)) if g == "relay" else neli_group_id(self.group(g))
            for g in groups
        ]
        view = LiveView(self.bootstrap, self.topics["neli"], self.topics["prices"], self.partitions)
        every = set(range(self.partitions))
        try:
            wait_for(
                lambda: all({p for p, m in view.leaders(g).items() if m} == every for g in ids),
                timeout,
                f"{groups} to lead every partition",
                interval_s=0.2,
            )
        finally:
            view.close()

    def partition_of(self, key: bytes | None) -> int:
        """The partition an instrument key belongs to."""
        from neli.partitioner import role_partition

        assert key is not None
        return role_partition(key, self.partitions)

    def admin(self) -> AdminClient:
        """An admin client for this cluster's broker."""
        return AdminClient({"bootstrap.servers": self.bootstrap})


def by_group(records: list[Record], group: str) -> dict[tuple[str, int], list[Record]]:
    """Records of one publishing group, keyed by (instrument, seq)."""
    out: dict[tuple[str, int], list[Record]] = {}
    for r in records:
        seq = r.seq
        if r.headers.get("group") == group and r.key is not None and seq is not None:
            out.setdefault((r.key.decode(), seq), []).append(r)
    return out


def missing(have: set[tuple[str, int]], expected: dict[str, int]) -> list[tuple[str, int]]:
    """(instrument, seq) pairs the feed produced that are not in ``have``."""
    return [
        (i, s) for i, last in expected.items() for s in range(1, last + 1) if (i, s) not in have
    ]
