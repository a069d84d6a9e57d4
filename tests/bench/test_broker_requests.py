"""The broker-requests benchmark's log reading: which requests count, and as whose."""

from __future__ import annotations

import json
from datetime import datetime

from bench.broker.requests import client_role, count_requests


def _line(when: str, api: str, client: str, local_ms: float) -> str:
    record = {
        "requestHeader": {"requestApiKeyName": api, "clientId": client},
        "localTimeMs": local_ms,
    }
    return f"[{when}] DEBUG Completed request:{json.dumps(record)} (kafka.request.logger)"


def test_client_roles_fold_members_partitions_and_nodes() -> None:
    """Both relays' producers of any partition are one role; names without numbers stay."""
    assert client_role("relay-r1-prices-0") == client_role("relay-r2-prices-3")
    assert client_role("relay-r2-prices-3") == "relay-rN-prices-N"
    assert client_role("neli-relay/r1") == "neli-relay/rN"
    assert client_role("neli-p1-2cb4f259/a") == "neli-pN/a"
    assert client_role("a-quotes") == "a-quotes"


def test_only_requests_completed_in_the_window_are_counted() -> None:
    """Lines outside [lo, hi) and lines that are not completed requests are left out."""
    log = "\n".join(
        [
            _line("2026-01-01 10:00:00,900", "FETCH", "relay-r1-raw", 0.5),
            _line("2026-01-01 10:00:01,000", "FETCH", "relay-r1-raw", 0.25),
            _line("2026-01-01 10:00:01,500", "FETCH", "relay-r2-raw", 0.25),
            _line("2026-01-01 10:00:01,700", "PRODUCE", "a-prices", 1.0),
            "[2026-01-01 10:00:01,800] INFO something else (kafka.server)",
            _line("2026-01-01 10:00:02,000", "PRODUCE", "a-prices", 9.0),
        ]
    )
    lo, hi = datetime(2026, 1, 1, 10, 0, 1), datetime(2026, 1, 1, 10, 0, 2)
    counted = count_requests(log, lo, hi)
    assert counted["apis"] == {"FETCH": 2, "PRODUCE": 1}
    assert counted["local_ms"] == {"FETCH": 0.5, "PRODUCE": 1.0}
    assert counted["clients"] == {("relay-rN-raw", "FETCH"): 2, ("a-prices", "PRODUCE"): 1}
