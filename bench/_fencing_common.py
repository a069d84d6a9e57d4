"""Shared parts of bench/relay_fencing.py: a producer client with its delivery record, timing and
read-back helpers."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

VALUE_BYTES = 200
TXN_TIMEOUT_S = 30.0  # client-side timeout of init/commit/abort calls
IDLE_S = 1.0  # a read-back ends after this long without a record
HANG_S = 5.0  # the timeout of calls the embedded broker never answers (a fenced EndTxn)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _value(label: str, i: int, size: int = 0) -> bytes:
    """``label-i|`` padded with dots to ``size`` bytes (no padding when size is 0)."""
    return f"{label}-{i}|".encode().ljust(size, b".")


def _tag(value: bytes | None) -> tuple[str, int]:
    """(label, i) of a value written by :func:`_value`."""
    head = (value or b"?-0|").split(b"|", 1)[0].decode(errors="replace")
    label, _, i = head.rpartition("-")
    return label, int(i) if i.isdigit() else -1


def _error(exc: BaseException) -> dict[str, Any]:
    """A KafkaException (or any exception) as a JSON-able description."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if isinstance(err, KafkaError):
        return {
            "name": err.name(),
            "code": err.code(),
            "fatal": err.fatal(),
            "retriable": err.retriable(),
            "txn_requires_abort": err.txn_requires_abort(),
            "message": err.str(),
        }
    return {"name": type(exc).__name__, "message": str(exc)}


def _timed(fn: Callable[[], object]) -> tuple[float, dict[str, Any] | None]:
    """Call ``fn``; return (seconds taken, None) or (seconds taken, error description)."""
    began = time.monotonic()
    try:
        fn()
    except KafkaException as exc:
        return time.monotonic() - began, _error(exc)
    return time.monotonic() - began, None


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _latency_ms(values_s: list[float]) -> dict[str, float] | None:
    if not values_s:
        return None
    ms = [v * 1000 for v in values_s]
    return {
        "n": len(ms),
        "p50": round(statistics.median(ms), 2),
        "p99": round(_percentile(ms, 0.99), 2),
        "max": round(max(ms), 2),
        "mean": round(statistics.fmean(ms), 2),
    }


def _create_topic(bootstrap: str, partitions: int, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=15)
    return topic


class Client:
    """A producer that remembers its client-level errors (error_cb) and delivery outcomes."""

    def __init__(
        self, bootstrap: str, txn_id: str | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        """Build it: idempotent, ``acks=all``, ``linger.ms=1``; transactional with ``txn_id``."""
        errors: list[str] = []
        self.errors = errors
        self.txn_id = txn_id
        self.delivered = 0
        self.failed: Counter[str] = Counter()
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 1,
            "enable.sparse.connections": False,
            "log.connection.close": False,
            # Not a method of self: a reference cycle would keep the producer alive.
            "error_cb": lambda err: errors.append(f"{err.name()}: {err.str()}"),
            **(extra or {}),
        }
        if txn_id is not None:
            config["transactional.id"] = txn_id
        self.p = Producer(config)

    def on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        """Delivery callback: count the outcome."""
        if err is None:
            self.delivered += 1
        else:
            self.failed[err.name()] += 1

    def produce(self, topic: str, partition: int, value: bytes) -> None:
        """Queue one record, waiting for room when the local queue is full."""
        while True:
            try:
                self.p.produce(topic, value, partition=partition, on_delivery=self.on_delivery)
            except BufferError:
                self.p.poll(0.005)
            else:
                return

    def transaction(self, topic: str, partition: int, label: str, n: int) -> dict[str, Any]:
        """begin, produce ``n`` records ``label-i``, commit; every step's outcome."""
        out: dict[str, Any] = {"begin": "ok", "produce": "ok", "commit": "ok"}
        try:
            self.p.begin_transaction()
        except KafkaException as exc:
            out["begin"] = _error(exc)
            out["produce"] = out["commit"] = "not attempted"
            return out
        try:
            for i in range(n):
                self.produce(topic, partition, _value(label, i))
        except KafkaException as exc:
            out["produce"] = _error(exc)
        took, err = _timed(lambda: self.p.commit_transaction(TXN_TIMEOUT_S))
        out["commit"] = err or "ok"
        out["commit_ms"] = _ms(took)
        if err is not None and err.get("txn_requires_abort"):
            took, abort_err = _timed(lambda: self.p.abort_transaction(HANG_S))
            out["abort"] = abort_err or "ok"
            out["abort_ms"] = _ms(took)
        self.p.poll(0)
        out["delivered"] = self.delivered
        out["delivery_errors"] = dict(self.failed)
        out["client_errors"] = list(self.errors)
        return out


def _read_both(bootstrap: str, topic: str, partition: int) -> dict[str, list[tuple[int, str]]]:
    """Every record of one partition as (offset, ``label-i``), per isolation level.

    Each reader stops once nothing has arrived for IDLE_S (the embedded broker's watermarks
    are not trusted, and a ``read_committed`` reader may legitimately see nothing).
    """
    readers = {}
    for level in ("read_uncommitted", "read_committed"):
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "isolation.level": level,
                "log.connection.close": False,
            }
        )
        c.assign([confluent_kafka.TopicPartition(topic, partition, OFFSET_BEGINNING)])
        readers[level] = c
    out: dict[str, list[tuple[int, str]]] = {level: [] for level in readers}
    last = dict.fromkeys(readers, time.monotonic())
    try:
        while any(time.monotonic() - last[level] < IDLE_S for level in readers):
            for level, c in readers.items():
                for msg in c.consume(1000, 0.05):
                    if msg.error() is None:
                        label, i = _tag(msg.value())
                        out[level].append((msg.offset() or 0, f"{label}-{i}"))
                        last[level] = time.monotonic()
    finally:
        for c in readers.values():
            c.close()
    return out


def _labels(records: list[tuple[int, str]]) -> dict[str, int]:
    """How many records of each label."""
    return dict(Counter(tag.rpartition("-")[0] for _, tag in records))


# --- 1. fencing -----------------------------------------------------------------------------
