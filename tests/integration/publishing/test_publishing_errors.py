"""Bad input never crashes a publisher and never loses anything; bad set-ups are refused."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import orjson
from confluent_kafka import Producer

from pricing_ha.local.cluster import PricingCluster, pricing_cli
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.waiting import wait_for


def _quote(instrument: str, seq: int, bid: float = 1.1, ask: float = 1.1002) -> bytes:
    return orjson.dumps(
        {"instrument": instrument, "seq": seq, "bid": bid, "ask": ask, "source_time_ns": 1}
    )


def test_poison_quotes_go_to_the_dlq_with_reasons(cluster: PricingCluster) -> None:
    """Bad JSON, missing fields, NaN, crossed, repeated and backwards seq: DLQ; the rest priced."""
    member = cluster.publisher("p1", "a")
    sym = "EURUSD"
    poison = [
        (b"{not json", "JSON"),
        (orjson.dumps({"instrument": sym, "seq": 2}), "bid"),
        (b'{"instrument":"EURUSD","seq":2,"bid":NaN,"ask":1.2,"source_time_ns":1}', ""),
        (_quote(sym, 2, bid=1.3, ask=1.2), "crossed"),
    ]
    values = [_quote(sym, 1)] + [v for v, _ in poison] + [_quote(sym, 2)]
    values += [_quote(sym, 2), _quote(sym, 1), _quote(sym, 3)]  # repeated, backwards, valid
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "partitioner": "murmur2_random"})
    for v in values:
        producer.produce(cluster.topics["quotes"], key=sym.encode(), value=v)
    assert producer.flush(10) == 0
    partition = cluster.partition_of(sym.encode())

    def priced() -> bool:
        raw = cluster.read("raw", idle_s=0.3)
        return sorted(int(r.headers["seq"]) for r in raw) == [1, 2, 3]

    wait_for(priced, 60, "the valid quotes to be priced")
    dlq = cluster.read("dlq")
    reasons = [r.headers["reason"] for r in dlq]
    assert len(dlq) == 6, reasons
    assert all(r.partition == partition for r in dlq)
    assert "JSON" in reasons[0] or "json" in reasons[0].lower()
    assert "bid" in reasons[1]
    assert "crossed" in reasons[3]
    assert "repeated" in reasons[4]
    assert "backward" in reasons[5]
    assert {r.value for r in dlq} == {values[i] for i in (1, 2, 3, 4, 6, 7)}
    assert member.alive(), "a poison quote must never crash the publisher"


def test_bad_config_file_is_refused_with_file_and_key(tmp_path: Path) -> None:
    """A config with a bad value exits non-zero naming the file and the key."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[neli]\nsession_timeout_ms = 3000\nthreshold_ms = 1000\n")
    result = subprocess.run(
        [*pricing_cli(), "run", "--group", "p1", "--config", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert str(bad) in result.stderr
    assert "neli.threshold_ms" in result.stderr


def test_partition_count_mismatch_is_refused(
    procs: ProcessGroup, tmp_path: Path, bootstrap: str
) -> None:
    """Topics with different partition counts: the publisher refuses to start, naming them."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    c = PricingCluster(procs, bootstrap, tmp_path)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    counts = {"quotes": 4, "neli": 4, "raw": 3, "prices": 4, "dlq": 4, "raw_dlq": 4}
    futures = admin.create_topics([NewTopic(c.topics[r], n, 1) for r, n in counts.items()])
    for f in futures.values():
        f.result(timeout=15)
    time.sleep(0.5)
    proc = c.publisher("p1", "a")
    assert proc.wait(60) == 4
    log = proc.log_tail(50)
    assert c.topics["raw"] in log
    assert "3" in log
