"""Fencing in one process (bench/relay_fencing.py's fencing section): producers A and B with
the same ``transactional.id`` on the embedded broker; after B's ``init_transactions``, which
error A gets and where, and which of A's records land and who can read them."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fencing_common import (
    HANG_S,
    TXN_TIMEOUT_S,
    Client,
    _create_topic,
    _labels,
    _ms,
    _read_both,
    _timed,
    _value,
)


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


def _open_transaction(a: Client, topic: str, records: int) -> int:
    """``a`` inits, begins a transaction and produces ``records`` records ``a-open-i`` to
    partition 0 of ``topic``, left open; how many are still unacknowledged after 10 s."""
    a.p.init_transactions(TXN_TIMEOUT_S)
    a.p.begin_transaction()
    for i in range(records):
        a.produce(topic, 0, _value("a-open", i))
    return int(a.p.flush(10))


def fencing_open_transaction(bootstrap: str) -> dict[str, Any]:
    """A's transaction is open (records acknowledged) when B inits; then A tries to commit."""
    topic = _create_topic(bootstrap, 1, "fence-open")
    tid = f"bench-fence-{uuid.uuid4().hex[:8]}"
    a = Client(bootstrap, tid)
    left = _open_transaction(a, topic, 5)
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
    _open_transaction(a, topic, 5)
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
    _open_transaction(a, topic, 3)
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
