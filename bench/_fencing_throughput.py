"""What transactions cost on the embedded broker (bench/relay_fencing.py's throughput section):
an idempotent producer as the in-run reference, transactional producers committing every N
records, and one transactional producer per partition side by side."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import summary
from _fencing_common import (
    TXN_TIMEOUT_S,
    VALUE_BYTES,
    Client,
    _create_topic,
    _error,
    _latency_ms,
    _load,
    _ms,
    _timed,
    _value,
)

COMMIT_EVERY = (1, 10, 100, 1000)
PARALLEL_PARTITIONS = 8
PARALLEL_COMMIT_EVERY = 100


def _warm_idempotent(bootstrap: str, topic: str, partitions: list[int]) -> Client:
    """An idempotent producer that has its producer id and has delivered once per partition.

    Without this, the first 0.5 s of a case would be the producer id timer of librdkafka,
    which a transactional producer spends in ``init_transactions`` (timed separately).
    """
    c = Client(bootstrap)
    for p in partitions:
        c.produce(topic, p, _value("warm-up", p))
    c.p.flush(TXN_TIMEOUT_S)
    c.delivered = 0
    c.failed.clear()
    return c


def idempotent_rate(bootstrap: str, topic: str, partitions: list[int], seconds: float) -> Any:
    """Records/s of one idempotent producer writing ``partitions`` round-robin, unflushed."""
    c = _warm_idempotent(bootstrap, topic, partitions)
    load = _load()
    began = time.monotonic()
    i = 0
    while time.monotonic() - began < seconds:
        c.produce(topic, partitions[i % len(partitions)], _value("idem", i, VALUE_BYTES))
        i += 1
        if i % 1000 == 0:
            c.p.poll(0)
    left = c.p.flush(60)
    took = time.monotonic() - began
    return {
        "producer": "idempotent, acks=all, linger.ms=1",
        "partitions": len(partitions),
        "records": c.delivered,
        "not_delivered": left + sum(c.failed.values()),
        "seconds": round(took, 3),
        "records_per_s": round(c.delivered / took),
        "load_average_1m": load,
    }


def _batch_loop(c: Client, topic: str, partition: int, every: int, seconds: float) -> Any:
    """Batches of ``every`` records for ``seconds`` (at least 3 batches); per-batch timings.

    A batch is begin, produce, flush, commit on a transactional producer (``end_txn`` is the
    commit after the flush); produce and flush on an idempotent one (the reference).
    """
    transactional = bool(c.txn_id)
    flush_s: list[float] = []
    end_s: list[float] = []
    txn_s: list[float] = []
    error = None
    began = time.monotonic()
    i = 0
    while time.monotonic() - began < seconds or len(txn_s) < 3:
        t0 = time.monotonic()
        try:
            if transactional:
                c.p.begin_transaction()
            for _ in range(every):
                c.produce(topic, partition, _value("batch", i, VALUE_BYTES))
                i += 1
            t1 = time.monotonic()
            c.p.flush(TXN_TIMEOUT_S)
            t2 = time.monotonic()
            if transactional:
                c.p.commit_transaction(TXN_TIMEOUT_S)
        except KafkaException as exc:
            error = _error(exc)
            break
        t3 = time.monotonic()
        flush_s.append(t2 - t1)
        end_s.append(t3 - t2)
        txn_s.append(t3 - t0)
        if time.monotonic() - began > 4 * seconds:
            break
    took = time.monotonic() - began
    out = {
        "batch_records": every,
        "batches": len(txn_s),
        "records": c.delivered,
        "seconds": round(took, 3),
        "records_per_s": round(c.delivered / took),
        "flush_ms": _latency_ms(flush_s),
        "error": error,
    }
    if transactional:
        out["end_txn_ms"] = _latency_ms(end_s)
        out["commit_ms"] = _latency_ms([f + e for f, e in zip(flush_s, end_s, strict=True)])
        out["transaction_ms"] = _latency_ms(txn_s)
    return out


def transactional_rate(bootstrap: str, topic: str, every: int, seconds: float) -> Any:
    """Records/s of one transactional producer on partition 0 committing every ``every``."""
    c = Client(bootstrap, f"bench-tput-{uuid.uuid4().hex[:8]}")
    init_s, _ = _timed(lambda: c.p.init_transactions(TXN_TIMEOUT_S))
    load = _load()
    row = _batch_loop(c, topic, 0, every, seconds)
    row["init_ms"] = _ms(init_s)
    row["load_average_1m"] = load
    c.p.flush(1)
    return row


def parallel_transactional_rate(bootstrap: str, topic: str, seconds: float) -> Any:
    """8 transactional producers, one per partition and thread, committing every 100."""
    clients = [
        Client(bootstrap, f"bench-par-{p}-{uuid.uuid4().hex[:8]}")
        for p in range(PARALLEL_PARTITIONS)
    ]
    inits: list[float] = [0.0] * len(clients)
    rows: list[Any] = [None] * len(clients)

    def init(k: int) -> None:
        inits[k], _ = _timed(lambda: clients[k].p.init_transactions(TXN_TIMEOUT_S))

    def run(k: int) -> None:
        rows[k] = _batch_loop(clients[k], topic, k, PARALLEL_COMMIT_EVERY, seconds)

    for target in (init, run):
        threads = [threading.Thread(target=target, args=(k,)) for k in range(len(clients))]
        load = _load()
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    took = time.monotonic() - began
    records = sum(r["records"] for r in rows)
    commits = [v for r in rows if r["commit_ms"] for v in [r["commit_ms"]["p50"]]]
    return {
        "producers": len(clients),
        "commit_every": PARALLEL_COMMIT_EVERY,
        "records": records,
        "seconds": round(took, 3),
        "records_per_s": round(records / took),
        "per_producer_records_per_s": [r["records_per_s"] for r in rows],
        "per_producer_commit_p50_ms": commits,
        "commit_ms_p99_worst_producer": max(
            (r["commit_ms"]["p99"] for r in rows if r["commit_ms"]), default=None
        ),
        "concurrent_init_ms": summary([_ms(s) for s in inits]),
        "errors": [r["error"] for r in rows if r["error"]],
        "load_average_1m": load,
    }


def throughput(bootstrap: str, seconds: float) -> dict[str, Any]:
    """The throughput cases; the idempotent producer is the reference of each comparison."""
    one = _create_topic(bootstrap, 1, "tput-one")
    out: dict[str, Any] = {"value_bytes": VALUE_BYTES, "seconds_per_case": seconds}
    out["one_partition_idempotent"] = idempotent_rate(bootstrap, one, [0], seconds)
    print(f"  idempotent, 1 partition: {out['one_partition_idempotent']}", flush=True)
    flushed = {}
    for every in COMMIT_EVERY:
        c = _warm_idempotent(bootstrap, one, [0])
        flushed[str(every)] = _batch_loop(c, one, 0, every, max(1.0, seconds / 2))
        print(f"  idempotent, flush every {every}: {flushed[str(every)]}", flush=True)
        del c
    out["one_partition_idempotent_by_flush_every"] = flushed
    txn = {}
    for every in COMMIT_EVERY:
        txn[str(every)] = transactional_rate(bootstrap, one, every, seconds)
        print(f"  transactional, every {every}: {txn[str(every)]}", flush=True)
    out["one_partition_transactional_by_commit_every"] = txn
    ref = out["one_partition_idempotent"]["records_per_s"]
    out["one_partition_ratio_to_idempotent"] = {
        k: round(v["records_per_s"] / ref, 4) if ref else None for k, v in txn.items()
    }
    eight = _create_topic(bootstrap, PARALLEL_PARTITIONS, "tput-eight")
    parts = list(range(PARALLEL_PARTITIONS))
    out["eight_partitions_idempotent"] = idempotent_rate(bootstrap, eight, parts, seconds)
    print(f"  idempotent, 8 partitions: {out['eight_partitions_idempotent']}", flush=True)
    out["eight_partitions_transactional"] = parallel_transactional_rate(bootstrap, eight, seconds)
    print(f"  transactional x8: {out['eight_partitions_transactional']}", flush=True)
    ref8 = out["eight_partitions_idempotent"]["records_per_s"]
    out["eight_partitions_ratio_to_idempotent"] = (
        round(out["eight_partitions_transactional"]["records_per_s"] / ref8, 4) if ref8 else None
    )
    return out


# --- 4. wedge after a broker pause ----------------------------------------------------------
