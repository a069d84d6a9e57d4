"""A wedge after a broker pause (bench/relay_fencing.py's wedge section): the broker is
SIGSTOPped longer than ``message.timeout.ms`` while an idempotent and a transactional producer
hold unacknowledged records; after SIGCONT, does each deliver again, does
``abort_transaction()`` recover the transactional one, does a new producer with the same
``transactional.id`` recover."""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import wait_until
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

from pricing_ha.local.broker import LocalKafka

WEDGE_MESSAGE_TIMEOUT_MS = 1500


def _pause_until_timed_out(broker: LocalKafka, topic: str, clients: list[Client]) -> float:
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


def wedge(broker: LocalKafka) -> dict[str, Any]:
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
