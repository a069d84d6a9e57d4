"""A zombie in a separate process (bench/relay_fencing.py's zombie section): a child commits
small transactions continuously; it is SIGSTOPped at a random point, a successor with the same
``transactional.id`` inits and commits, the child is SIGCONTed; does any of the child's records
land after the successor's first record, and which error ends the child.

The child is bench/relay_fencing.py run with the hidden ``--zombie`` argument
(:func:`zombie_child`); every child is stopped by PID, even on failure.
"""

from __future__ import annotations

import contextlib
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
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaException

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import summary, wait_until
from _fencing_common import (
    HANG_S,
    TXN_TIMEOUT_S,
    Client,
    _create_topic,
    _error,
    _labels,
    _ms,
    _read_both,
    _timed,
    _value,
)

from pricing_ha.local.procs import freeze

ZOMBIE_LIFETIME_S = 120.0
#: The script a zombie child runs (``relay_fencing.py --zombie ...``, see its ``main``).
SCRIPT = Path(__file__).resolve().parent / "relay_fencing.py"


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
    argv = [sys.executable, str(SCRIPT), "--zombie"]
    argv += [bootstrap, topic, str(partition), tid, str(per_txn)]
    child = ZombieProc(argv, log)
    row: dict[str, Any] = {"partition": partition, "records_per_zombie_transaction": per_txn}
    try:
        if not wait_until(lambda: child.count("commit") >= 20, 30, 0.02):
            row["failed"] = f"the zombie did not commit 20 transactions: {child.events[-3:]}"
            return row
        time.sleep(random.uniform(0, 0.05))
        freeze(child.proc.pid)  # returns once every thread of it has stopped
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
