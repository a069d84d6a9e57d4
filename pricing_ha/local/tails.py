"""Following topics and judging what they hold: the tail the benchmarks and tests read topics
with, and the exactly-once checks of ``prices`` against the feed.

:class:`TopicTail` hands every fetch of some topics to a callback, in a thread, as a reader of
``prices`` sees them (``read_committed``, control records apart). :func:`seq_defects` counts
duplicates, reorderings and gaps from a topic alone; :func:`exactly_once` judges ``prices``
against what the feed produced and, when it is not exactly once, :func:`locate_defects` says
where.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from pricing_ha.kafka.headers import is_control
from pricing_ha.local.cluster import PricingCluster, Record
from pricing_ha.local.judging import judge
from pricing_ha.local.seqs import value_epoch
from pricing_ha.local.verdict import Verdict
from pricing_ha.local.waiting import wait_until


def consumer(bootstrap: str, group: str | None = None) -> Consumer:
    """A consumer that commits nothing (of a throwaway group unless ``group`` is given) and
    reads ``read_committed``, as subscribers do (librdkafka's default, stated: what a reader
    of ``prices`` sees is what is judged)."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "isolation.level": "read_committed",
            "group.id": group or f"tail-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            "log.connection.close": False,
        }
    )


def _is_data(msg: Message) -> bool:
    """A record without error that is not a control record (a relay's takeover marker)."""
    return msg.error() is None and not is_control(msg.key(), msg.headers())


class TopicTail:
    """Follows topics in a daemon thread, handing each fetch to ``on_batch(records, received)``.

    Every partition of ``topics`` is read from ``start`` (the beginning by default). A fetch
    waits up to 0.1 s for one record, then takes whatever else has already arrived, so records
    are handed over soon after they land; ``received`` is the monotonic time just after the
    fetch. Records with an error, and control records, are left out; ``on_batch`` runs in the
    tail's thread. Control records go to ``on_control(records)``, if given (same thread).
    """

    def __init__(
        self,
        bootstrap: str,
        topics: Iterable[str],
        partitions: int,
        on_batch: Callable[[list[Message], float], None],
        *,
        start: int = OFFSET_BEGINNING,
        name: str = "topic-tail",
        on_control: Callable[[list[Message]], None] | None = None,
    ) -> None:
        """Start following."""
        self._on_batch = on_batch
        self._on_control = on_control
        self._stop = threading.Event()
        self._consumer = consumer(bootstrap)
        self._consumer.assign(
            [TopicPartition(t, p, start) for t in topics for p in range(partitions)]
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self._consumer.consume(1, 0.1)
                if batch:
                    batch += self._consumer.consume(9999, 0)
                    received = time.monotonic()
                    self._on_batch([m for m in batch if _is_data(m)], received)
                    if self._on_control is not None:
                        control = [m for m in batch if m.error() is None and not _is_data(m)]
                        if control:
                            self._on_control(control)
        finally:
            self._consumer.close()

    def close(self) -> None:
        """Stop following."""
        self._stop.set()
        self._thread.join(10)


def exactly_once(cluster: PricingCluster, wait_s: float = 0.0) -> dict[str, Any]:
    """Judge ``prices`` (read ``read_committed``) against the feed, retrying for up to
    ``wait_s`` until it is exactly once.

    Returns the verdict's counts, summed over the instruments, and under ``topic`` the
    duplicates, reorderings and gaps counted from the topic alone
    (:func:`seq_defects`); ``ok`` only if both find nothing.
    """
    expected = cluster.expected()
    last: list[tuple[Verdict, list[Record]]] = []  # the latest read only (1M+ records)

    def ok() -> bool:
        prices = cluster.read("prices")
        last[:] = [(judge(expected, prices), prices)]
        return last[0][0].ok and _clean(seq_defects(prices))

    wait_until(ok, wait_s, poll_s=1.0)
    v, prices = last[0]
    topic = seq_defects(prices)
    out: dict[str, Any] = {
        "ok": v.ok and _clean(topic),
        "expected": sum(i.expected for i in v.instruments),
        "delivered": sum(i.delivered for i in v.instruments),
        "duplicates": sum(i.duplicates for i in v.instruments),
        "missing": sum(i.missing for i in v.instruments),
        "out_of_order": sum(i.out_of_order for i in v.instruments),
        "topic": topic,
    }
    if not out["ok"]:
        out["defects"] = locate_defects(prices)  # the records judged, not a later read
    return out


def seq_defects(prices: Iterable[Record]) -> dict[str, int]:
    """Per instrument, in the order a reader sees them (partition, offset), counted from the
    topic alone: ``duplicates`` (a seq seen before), ``out_of_order`` (a seq below one seen
    before) and ``gaps`` (seqs absent below the highest one seen, from seq 1, per epoch);
    ``instruments`` is how many were counted.
    """
    by_instrument: dict[str, list[tuple[int, int]]] = {}
    for r in sorted(prices, key=lambda r: (r.partition, r.offset)):
        seq = r.seq
        if r.key is None or seq is None:
            continue
        by_instrument.setdefault(r.key.decode(), []).append((value_epoch(r.value), seq))
    out = {"instruments": len(by_instrument), "duplicates": 0, "out_of_order": 0, "gaps": 0}
    for positions in by_instrument.values():
        unique = set(positions)
        out["duplicates"] += len(positions) - len(unique)
        out["out_of_order"] += sum(1 for a, b in itertools.pairwise(positions) if b < a)
        for epoch in {e for e, _ in unique}:
            seqs = {s for e, s in unique if e == epoch}
            out["gaps"] += max(seqs) - len(seqs)
    return out


def _clean(topic: dict[str, int]) -> bool:
    return topic["duplicates"] == topic["out_of_order"] == topic["gaps"] == 0


def locate_defects(prices: list[Record], limit: int = 40) -> dict[str, Any]:
    """Where ``prices`` repeats, reorders or skips a seq: the first ``limit`` such records,
    each with the copy (or the higher seq, or the record before the skip) it follows, to line
    them up with the run's events.

    Each entry: instrument, seq, kind (``duplicate``, ``out_of_order``, or ``gap`` with how
    many seqs were skipped), and for the record and the earlier one: partition, offset,
    timestamp (ms) and the relay member that wrote it.
    Grouped per partition as runs of consecutive offsets, so a window of two writers shows as
    one run.
    """

    def where(r: Record) -> dict[str, Any]:
        return {
            "partition": r.partition,
            "offset": r.offset,
            "timestamp_ms": r.timestamp_ms,
            "relay": r.headers.get("relay"),
        }

    seen: dict[tuple[str, int], Record] = {}
    highest: dict[str, Record] = {}
    found: list[dict[str, Any]] = []
    for r in sorted(prices, key=lambda r: (r.partition, r.offset)):
        if r.key is None or "seq" not in r.headers:
            continue
        instrument, seq = r.key.decode(), int(r.headers["seq"])
        earlier = seen.get((instrument, seq))
        top = highest.get(instrument)
        if earlier is not None:
            found.append(
                {
                    "kind": "duplicate",
                    "instrument": instrument,
                    "seq": seq,
                    "record": where(r),
                    "earlier": where(earlier),
                }
            )
        elif top is not None and int(top.headers["seq"]) > seq:
            found.append(
                {
                    "kind": "out_of_order",
                    "instrument": instrument,
                    "seq": seq,
                    "record": where(r),
                    "after": where(top),
                }
            )
        elif top is not None and seq > int(top.headers["seq"]) + 1:
            found.append(
                {
                    "kind": "gap",
                    "instrument": instrument,
                    "seq": seq,
                    "skipped": seq - int(top.headers["seq"]) - 1,
                    "record": where(r),
                    "after": where(top),
                }
            )
        seen.setdefault((instrument, seq), r)
        if top is None or int(top.headers["seq"]) < seq:
            highest[instrument] = r
    runs: list[dict[str, Any]] = []
    for d in found:
        rec = d["record"]
        last = runs[-1] if runs else None
        if (
            last
            and last["partition"] == rec["partition"]
            and rec["offset"] - last["to_offset"] <= 50
        ):
            last["to_offset"] = rec["offset"]
            last["to_timestamp_ms"] = rec["timestamp_ms"]
            last["count"] += 1
            last["relays"] = sorted({*last["relays"], str(rec["relay"])})
        else:
            runs.append(
                {
                    "partition": rec["partition"],
                    "from_offset": rec["offset"],
                    "to_offset": rec["offset"],
                    "from_timestamp_ms": rec["timestamp_ms"],
                    "to_timestamp_ms": rec["timestamp_ms"],
                    "count": 1,
                    "relays": [str(rec["relay"])],
                }
            )
    return {"total": len(found), "runs": runs, "first": found[:limit]}
