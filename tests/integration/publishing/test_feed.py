"""`pricing-ha feed` against a real Kafka-protocol broker: keying, order, summary, replay."""

from __future__ import annotations

import socket
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from typer.testing import CliRunner

from pricing_ha.cli import app
from pricing_ha.kafka.partitioning import instrument_partition
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.quotes import Quote, parse_quote

M = 4


def read_topic(bootstrap: str, topic: str, until: Callable[[list[Message]], bool]) -> list[Message]:
    """Reads every partition of ``topic`` from the start until ``until(messages)`` holds."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"feed-test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(M)])
    got: list[Message] = []

    def read_one() -> bool:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg)
        return until(got)

    try:
        wait_for(read_one, 30, lambda: f"more than {len(got)} messages from {topic}", interval_s=0)
    finally:
        consumer.close()
    return got


def consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, Quote]]:
    """Reads ``expected`` quotes from ``topic`` as (partition, quote)."""
    messages = read_topic(bootstrap, topic, lambda got: len(got) >= expected)
    return [(_partition(m), parse_quote(m.value(), m.key())) for m in messages]


def _partition(msg: Message) -> int:
    partition = msg.partition()
    assert partition is not None  # a consumed record has one
    return partition


def feed(bootstrap: str, topic: str, *args: str) -> tuple[int, str, str]:
    """Runs `pricing-ha feed` with md.quotes renamed to ``topic``."""
    result = CliRunner().invoke(
        app,
        ["feed", "--bootstrap", bootstrap, *args],
        env={"PRICING_HA__TOPICS__QUOTES": topic, "PRICING_HA__TOPICS__PARTITIONS": str(M)},
    )
    return result.exit_code, result.stdout, result.stderr


def test_feed_delivers_every_quote_keyed_and_in_order(
    bootstrap: str, topic_factory: Callable[[int], str], tmp_path: Path
) -> None:
    """Every instrument's quotes land on its murmur2 partition with seq 1..n, as summarised."""
    topic = topic_factory(M)
    summary_path = tmp_path / "summary.json"
    code, out, err = feed(
        bootstrap,
        topic,
        *("--count", "120", "--instruments", "12", "--rate", "0"),
        *("--summary-out", str(summary_path)),
    )
    assert code == 0, err
    assert "produced 120, delivered 120, failed 0" in out
    by_instrument: dict[str, list[int]] = defaultdict(list)
    for partition, q in consume_all(bootstrap, topic, 120):
        assert partition == instrument_partition(q.instrument, M)
        by_instrument[q.instrument].append(q.seq)
    assert len(by_instrument) == 12
    assert all(seqs == list(range(1, 11)) for seqs in by_instrument.values())
    summary = orjson.loads(summary_path.read_bytes())
    assert summary["delivered"] == 120
    assert {s: v["last_seq"] for s, v in summary["instruments"].items()} == {
        s: seqs[-1] for s, seqs in by_instrument.items()
    }


def test_same_seed_feeds_identical_market_data(
    bootstrap: str, topic_factory: Callable[[int], str]
) -> None:
    """Two runs with one seed send the same (instrument, seq, bid, ask) stream."""
    streams = []
    for _ in range(2):
        topic = topic_factory(M)
        code, _, err = feed(bootstrap, topic, "--count", "30", "--seed", "7", "--rate", "0")
        assert code == 0, err
        streams.append(
            sorted(
                (q.instrument, q.seq, q.bid, q.ask) for _, q in consume_all(bootstrap, topic, 30)
            )
        )
    assert streams[0] == streams[1]


def test_duration_is_paced_by_rate(bootstrap: str, topic_factory: Callable[[int], str]) -> None:
    """--duration 1 at 20 Hz for 2 instruments sends exactly the 40 quotes due in that second."""
    topic = topic_factory(M)
    started = time.monotonic()
    code, out, err = feed(bootstrap, topic, "--duration", "1", "--rate", "20", "--instruments", "2")
    assert code == 0, err
    assert "produced 40, delivered 40" in out
    assert time.monotonic() - started >= 0.95


def test_replay_sends_file_rows(
    bootstrap: str, topic_factory: Callable[[int], str], tmp_path: Path
) -> None:
    """A replay CSV is sent row by row with its own source times."""
    topic = topic_factory(M)
    csv = tmp_path / "quotes.csv"
    csv.write_text(
        "instrument,seq,bid,ask,source_time_ns\n"
        "AAPL,10,189.5,189.52,1700000000000000000\n"
        "MSFT,1,410.1,410.2,1700000000000000001\n"
        "AAPL,11,189.51,189.53,1700000000000000002\n"
    )
    code, out, err = feed(bootstrap, topic, "--replay", str(csv), "--rate", "0")
    assert code == 0, err
    assert "replaying 3 quotes of 2 instruments" in out
    got = sorted(
        (q.instrument, q.seq, q.source_time_ns) for _, q in consume_all(bootstrap, topic, 3)
    )
    assert got == [
        ("AAPL", 10, 1700000000000000000),
        ("AAPL", 11, 1700000000000000002),
        ("MSFT", 1, 1700000000000000001),
    ]


def test_bad_replay_row_sends_nothing(
    bootstrap: str, topic_factory: Callable[[int], str], tmp_path: Path
) -> None:
    """A bad row fails the command with file and line, before any quote is produced."""
    topic = topic_factory(M)
    csv = tmp_path / "bad.csv"
    csv.write_text("AAPL,1,189.5,189.52\nAAPL,1,189.5,189.52\n")
    code, _, err = feed(bootstrap, topic, "--replay", str(csv))
    assert code == 1
    assert f"{csv}:2: repeated seq 1 for AAPL" in err
    # Proof of absence without waiting: one sentinel per partition, written after the failed
    # run, must be the first thing on each partition.
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(M):
        producer.produce(topic, value=b"sentinel", partition=partition)
    assert producer.flush(15) == 0
    messages = read_topic(bootstrap, topic, lambda got: len(got) >= M)
    assert [m.value() for m in messages] == [b"sentinel"] * M


def test_missing_topic_exits_4(bootstrap: str, unique_name: Callable[[str], str]) -> None:
    """Feeding into a topic that does not exist is refused with status 4."""
    code, _, err = feed(bootstrap, unique_name("absent"), "--count", "1")
    assert code == 4
    assert "does not exist" in err


def test_unreachable_broker_exits_3() -> None:
    """With nothing listening, the feed gives up within the bound with status 3."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        ["feed", "--bootstrap", f"127.0.0.1:{port}", "--count", "1"],
        env={"PRICING_HA__BROKER__CONNECT_TIMEOUT_MS": "1000"},
    )
    assert result.exit_code == 3
    assert "did not answer within 1 s" in result.stderr
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("instruments", [1, 30])
def test_summary_counts_match_count_option(
    bootstrap: str, topic_factory: Callable[[int], str], tmp_path: Path, instruments: int
) -> None:
    """The summary file totals equal --count for few and many instruments."""
    topic = topic_factory(M)
    path = tmp_path / "s.json"
    code, _, err = feed(
        bootstrap,
        topic,
        *("--count", "60", "--instruments", str(instruments), "--rate", "0"),
        *("--summary-out", str(path)),
    )
    assert code == 0, err
    summary = orjson.loads(path.read_bytes())
    assert summary["produced"] == summary["delivered"] == 60
    assert sum(v["delivered"] for v in summary["instruments"].values()) == 60
