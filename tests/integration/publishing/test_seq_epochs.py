"""Sequence epochs on the real broker: a feed restart, forged seqs, an operator's mark reset.

Judged from the data: every ``(instrument, epoch, seq)`` the feed wrote to ``md.quotes`` reaches
``prices`` exactly once, in order, whatever else was written beside it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

from pricing_ha.config import RelayConfig
from pricing_ha.kafka.headers import header_dict
from pricing_ha.local.cluster import PricingCluster, Record
from pricing_ha.local.waiting import wait_for
from pricing_ha.telemetry.jsonl import load_spans
from tests.integration.feed_end import end_feed_once_flowing

TICK_S = 0.1  # the feed's rate: 10 quotes per second per instrument
WINDOW_S = RelayConfig().reorder_window_ms / 1000
MAX_SEQ = 2**63 - 1
CATCH_UP_S = 90.0

Key = tuple[str, int, int]  # instrument, epoch, seq


def _key(r: Record) -> Key:
    doc = orjson.loads(r.value or b"{}")
    return str(doc["instrument"]), int(doc.get("epoch", 0)), int(doc["seq"])


def _fed(cluster: PricingCluster) -> dict[str, list[Key]]:
    """What the feed wrote to md.quotes, per instrument in order (forged records left out)."""
    out: dict[str, list[Key]] = {}
    for r in sorted(cluster.read("quotes", idle_s=0.5), key=lambda r: (r.partition, r.offset)):
        if r.headers.get("forged") is None:
            k = _key(r)
            out.setdefault(k[0], []).append(k)
    return out


def _delivered(cluster: PricingCluster, *, live: bool = False) -> dict[str, list[Record]]:
    """The prices on ``prices`` per instrument, in order (``live``: as far as committed now)."""
    records = _read_committed_now(cluster) if live else cluster.read("prices", idle_s=0.5)
    out: dict[str, list[Record]] = {}
    for r in sorted(records, key=lambda r: r.offset):
        out.setdefault(_key(r)[0], []).append(r)
    return out


def _read_committed_now(cluster: PricingCluster, timeout_s: float = 20.0) -> list[Record]:
    """``prices`` up to its end offsets as of now, while the relay writes it: the reader's
    position, not the last record's offset, tells when it is there (a transaction's commit
    marker takes an offset no record has)."""
    topic = cluster.topics["prices"]
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        parts = [TopicPartition(topic, p) for p in range(cluster.partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        out: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, 0.2)
            out.extend(_record(m) for m in batch if m.error() is None and m.key() is not None)
            done = consumer.position(parts)
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in done):
                return out
        raise AssertionError(f"prices not read to its end within {timeout_s} s")
    finally:
        consumer.close()


def _record(msg: Message) -> Record:
    key, value = msg.key(), msg.value()
    return Record(
        msg.partition() or 0,
        msg.offset() or 0,
        key.encode() if isinstance(key, str) else key,
        value.encode() if isinstance(value, str) else value,
        header_dict(msg.headers()),
        msg.timestamp()[1],
    )


def _wait_exactly_once(cluster: PricingCluster) -> dict[str, list[Record]]:
    """Wait until prices holds every fed (instrument, epoch, seq) once, in order; return it."""
    state: dict[str, object] = {"why": "", "got": {}}

    def check() -> bool:
        fed, got = _fed(cluster), _delivered(cluster)
        state["got"] = got
        for instrument, keys in fed.items():
            have = [_key(r) for r in got.get(instrument, [])]
            if have != keys:
                extra = sorted(set(have) - set(keys))[:3]
                miss = sorted(set(keys) - set(have))[:3]
                state["why"] = f"{instrument}: {len(have)}/{len(keys)}, extra {extra}, miss {miss}"
                return False
        return bool(fed)

    wait_for(check, CATCH_UP_S, lambda: f"every fed seq once on prices: {state['why']}")
    got = state["got"]
    assert isinstance(got, dict)
    return got


def _start(cluster: PricingCluster, *relays: str, groups: tuple[str, ...] = ("p1", "p2")) -> None:
    for g in groups:
        cluster.publisher(g, "a")
    for r in relays:
        cluster.relay(r)
    cluster.wait_led([*groups, "relay"])


def _producer(cluster: PricingCluster) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})


def _forge(
    cluster: PricingCluster,
    role: str,
    instrument: str,
    seq: int,
    epoch: int,
    *,
    headers: list[tuple[str, bytes]],
) -> None:
    """Write a forged quote (``quotes``) or raw price (``raw``) with a valid body."""
    body: dict[str, object] = {
        "instrument": instrument,
        "epoch": epoch,
        "seq": seq,
        "bid": 1.1,
        "ask": 1.2,
        "source_time_ns": time.time_ns(),
    }
    if role == "raw":
        body["mid"] = 1.15
    p = _producer(cluster)
    p.produce(
        cluster.topics[role],
        key=instrument.encode(),
        value=orjson.dumps(body, option=orjson.OPT_SORT_KEYS),
        partition=cluster.partition_of(instrument.encode()),
        headers=[("forged", b"1"), *headers],
    )
    assert p.flush(10) == 0


def _flowing(cluster: PricingCluster) -> tuple[str, int]:
    """Wait until prices flow; return an instrument and the feed's current epoch."""
    state: dict[str, Key] = {}

    def some() -> bool:
        got = _delivered(cluster, live=True)
        if got:
            state["k"] = _key(next(iter(got.values()))[-1])
        return bool(got)

    wait_for(some, 60, "prices to flow")
    return state["k"][0], state["k"][1]


def _raw_headers(cluster: PricingCluster, group: str) -> list[tuple[str, bytes]]:
    return [
        ("group", cluster.group(group).encode()),
        ("member", b"a"),
        ("publish_ns", str(time.time_ns()).encode()),
    ]


@pytest.mark.parametrize("groups", [("p1", "p2"), ("p1",)], ids=["both-groups", "one-group"])
def test_a_feed_restart_resumes_prices_within_the_reorder_window_and_two_ticks(
    cluster: PricingCluster, groups: tuple[str, ...]
) -> None:
    """A feed restarted mid-run (new epoch, seqs from 1): its prices follow within W + 2 ticks,
    confirmed by the other group at once, or after the window when only one group runs."""
    _start(cluster, "r1", groups=groups)
    assert cluster.feed(instruments=6, rate=1 / TICK_S, duration=4).wait(60) == 0
    restarted_ms = time.time() * 1000
    assert cluster.feed(instruments=6, rate=1 / TICK_S, duration=4).wait(60) == 0
    got = _wait_exactly_once(cluster)
    quotes = cluster.read("quotes", idle_s=0.5)
    delays = {}
    for instrument, records in got.items():
        epochs = sorted({_key(r)[1] for r in records})
        assert len(epochs) == 2, f"{instrument}: one epoch per feed run, got {epochs}"
        first_quote = min(r.timestamp_ms for r in quotes if _key(r)[:2] == (instrument, epochs[1]))
        assert first_quote >= restarted_ms
        first_price = min(r.timestamp_ms for r in records if _key(r)[1] == epochs[1])
        delays[instrument] = (first_price - first_quote) / 1000
    bound = WINDOW_S + 2 * TICK_S
    worst = max(delays.values())
    print(
        f"feed restart ({len(groups)} group(s)): first new price after the first new quote, "
        f"worst {worst:.3f} s (bound {bound:.3f} s): {sorted(delays.values())}"
    )
    assert worst <= bound, delays


def test_forged_max_seqs_on_quotes_and_raw_prices_do_not_stop_real_prices(
    cluster: PricingCluster,
) -> None:
    """Seq 2^63-1 forged on md.quotes and on prices.raw: every real price still arrives once."""
    _start(cluster, "r1")
    cluster.feed(instruments=6, rate=1 / TICK_S, duration=60)
    instrument, epoch = _flowing(cluster)
    others = sorted(k for k in _delivered(cluster, live=True) if k != instrument)
    _forge(cluster, "quotes", instrument, MAX_SEQ, epoch, headers=[])
    target = others[0] if others else instrument
    _forge(cluster, "raw", target, MAX_SEQ, epoch, headers=_raw_headers(cluster, "p1"))
    forged_ms = time.time() * 1000
    # Two more seconds of real quotes after the forgeries: they must all reach prices.
    end_feed_once_flowing(cluster, "quotes", forged_ms + 2000)
    got = _wait_exactly_once(cluster)
    for name in (instrument, target):
        assert max(r.timestamp_ms for r in got[name]) > forged_ms + 2000
    assert all(_key(r)[2] != MAX_SEQ for records in got.values() for r in records)
    dead = cluster.read("dlq", idle_s=0.5)
    assert any(_key(r) == (instrument, epoch, MAX_SEQ) for r in dead)
    assert any("jumps by" in r.headers.get("reason", "") for r in dead)
    raw_dead = cluster.read("raw_dlq", idle_s=0.5)
    assert [r.headers["reason"] for r in raw_dead if _key(r)[0] == target]
    assert "not confirmed" in raw_dead[0].headers["reason"]


def test_reset_mark_restores_an_instrument_and_survives_a_relay_restart(
    cluster: PricingCluster, tmp_path: Path
) -> None:
    """A mark moved by a confirmed bad jump stops one instrument; reset-mark restores it, also
    after the relay restarts; the operator's and the relay's spans record it."""
    traces = tmp_path / "traces"
    cluster.env.update(
        {
            "PRICING_HA__TELEMETRY__TRACES_DIR": str(traces),
            "OTEL_SDK_DISABLED": "false",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
        }
    )
    _start(cluster, "r1")
    cluster.feed(instruments=4, rate=1 / TICK_S, duration=40)
    instrument, epoch = _flowing(cluster)
    bad = 2**62
    for group in ("p1", "p2"):  # both groups "confirm" it: it gets through the bounds
        _forge(cluster, "raw", instrument, bad, epoch, headers=_raw_headers(cluster, group))

    def latest() -> Key | None:
        records = _delivered(cluster, live=True).get(instrument, [])
        return _key(records[-1]) if records else None

    wait_for(lambda: latest() == (instrument, epoch, bad), 30, "the bad jump on prices")
    poisoned_ms = time.time() * 1000

    def others_moved_on() -> bool:
        got = _delivered(cluster, live=True)
        others = [rs for k, rs in got.items() if k != instrument]
        return bool(others) and all(
            rs[-1].timestamp_ms > poisoned_ms + 5 * TICK_S * 1000 for rs in others
        )

    # The relay went on for 5 ticks after the jump, and dropped every real price of it.
    wait_for(others_moved_on, 30, "the other instruments to move on")
    assert latest() == (instrument, epoch, bad)
    proc = cluster.cli("reset-mark", "reset-mark", instrument)
    assert proc.wait(60) == 0, proc.log_tail()
    reset_at_ms = time.time() * 1000

    def resumed() -> bool:
        records = _delivered(cluster, live=True).get(instrument, [])
        return any(r.timestamp_ms > reset_at_ms and _key(r)[2] < bad for r in records)

    wait_for(resumed, 30, f"{instrument} to resume after the reset")

    def spans(name: str) -> list[dict[str, Any]]:
        files = sorted(traces.glob("*.jsonl"))
        return [s for f in files for s in load_spans(f) if s["name"] == name]

    assert spans(f"reset-mark {instrument}")  # the operator's, ended before the command exits
    wait_for(lambda: bool(spans(f"relay.reset-mark {instrument}")), 30, "the relay's span")
    # A new relay rebuilds the marks from prices (checkpoints and tail): the reset holds.
    r2 = cluster.relay("r2")
    wait_for(lambda: "standby of" in r2.log_tail(200), 60, "r2's standby to open")
    cluster.members["relay-r1"].kill()
    killed_ms = time.time() * 1000

    def resumed_after_restart() -> bool:
        records = _delivered(cluster, live=True).get(instrument, [])
        return any(r.timestamp_ms > killed_ms + 500 for r in records)

    wait_for(resumed_after_restart, 60, f"{instrument} to flow from the new relay")
    assert "reset by an operator" in cluster.members["relay-r1"].log_tail(200)
