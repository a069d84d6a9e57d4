"""The pipeline's transforms on small hand-built DataFrames, with exact expected results."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pricing_ha.pipeline import (
    availability,
    dead_letter_sources,
    expected,
    failovers,
    first_delivery_share,
    leadership,
    ohlc_bars,
    prices,
    quotes,
    reconcile,
)
from tests.spark.records import T0, control, frame, price, quote

pytestmark = pytest.mark.spark

T0_US = int(T0.timestamp()) * 1_000_000


def rows(df: DataFrame, *cols: str) -> list[tuple[Any, ...]]:
    """The rows of ``df`` (timestamps as microseconds after T0), as tuples of ``cols``."""
    for c in cols:
        if dict(df.dtypes)[c] == "timestamp":
            df = df.withColumn(c, F.unix_micros(c) - F.lit(T0_US))
    return [tuple(r) for r in df.select(*cols).collect()]


def expected_of(spark: SparkSession, last: dict[str, int]) -> DataFrame:
    """Quotes 1..last of each instrument, as :func:`expected` sees them."""
    recs = [
        quote(i, s, offset=n)
        for n, (i, s) in enumerate((i, s) for i, k in last.items() for s in range(1, k + 1))
    ]
    return expected(quotes(frame(spark, recs)))


def test_decode_prices_skips_control_and_unreadable_records(spark: SparkSession) -> None:
    """Control records (no key, the control header) and values that are not prices are
    dropped; a keyed price carrying the control header is still a price; headers become
    columns."""
    key, value, topic, partition, offset, ts, headers = price("EURUSD", 3, 4, t=3)
    forged = (key, value, topic, partition, offset, ts, [*headers, ("pricing-ha-control", b"x")])
    recs = [
        price("EURUSD", 1, 0, t=1, relay_ms=1500, publish_ms=1200, member="b"),
        control(1),
        (b"EURUSD", b"not json", "p", 0, 2, T0, []),
        price("EURUSD", 2, 3, t=2),
        forged,
    ]
    got = rows(
        prices(frame(spark, recs)),
        "instrument",
        "seq",
        "member",
        "publish_ns",
        "relay",
        "relay_ns",
        "offset",
    )
    t0_ns = T0_US * 1000
    assert got == [
        ("EURUSD", 1, "b", t0_ns + 1_200_000_000, "r1", t0_ns + 1_500_000_000, 0),
        ("EURUSD", 2, "a", None, None, None, 3),
        ("EURUSD", 3, "a", None, None, None, 4),
    ]


def test_expected_excludes_dead_lettered_quotes_and_counts_each_seq_once(
    spark: SparkSession,
) -> None:
    """A quote repeated on md.quotes is expected once; one a publisher dead-lettered, never."""
    q = frame(spark, [quote("A", 1, 0), quote("A", 2, 1), quote("A", 2, 2), quote("A", 3, 3)])
    dlq_headers = [("source.partition", b"0"), ("source.offset", b"3")]
    dlq = frame(spark, [(b"A", b"{}", "dlq", 0, 0, T0, dlq_headers)] * 2)
    got = expected(quotes(q), dead_letter_sources(dlq))
    assert sorted(rows(got, "instrument", "seq")) == [("A", 1), ("A", 2)]


def test_reconcile_names_missing_duplicated_unexpected_and_out_of_order_rows(
    spark: SparkSession,
) -> None:
    """Each kind of breach of exactly-once is a row naming the instrument, seq and copies."""
    p = frame(
        spark,
        [
            price("A", 1, 0, t=1),
            price("A", 2, 1, t=2),
            price("A", 2, 2, t=3),  # duplicated
            price("A", 5, 3, t=4),
            price("A", 4, 4, t=5),  # after 5: out of order; 3 is missing
            price("A", 6, 5, t=6),  # never quoted
            price("B", 1, 0, t=1, partition=1),
        ],
    )
    got = rows(
        reconcile(expected_of(spark, {"A": 5, "B": 1}), prices(p)),
        "instrument",
        "seq",
        "status",
        "copies",
        "at",
    )
    assert got == [
        ("A", 2, "duplicated", 2, ["0:1", "0:2"]),
        ("A", 3, "missing", 0, []),
        ("A", 4, "out_of_order", 1, ["0:4"]),
        ("A", 6, "unexpected", 1, ["0:5"]),
    ]


def test_reconcile_of_a_clean_run_has_no_rows(spark: SparkSession) -> None:
    """Every seq once, in order, across two partitions: nothing to report."""
    p = frame(
        spark,
        [price("A", s, s - 1, t=s) for s in range(1, 4)]
        + [price("B", s, s + 9, t=s, partition=1) for s in range(1, 3)],
    )
    assert reconcile(expected_of(spark, {"A": 3, "B": 2}), prices(p)).count() == 0


def test_availability_counts_silences_latency_and_dropped_duplicates(spark: SparkSession) -> None:
    """Per instrument: counts, the longest gap and when it ended, latency percentiles, and the
    raw copies beyond the first."""
    p = frame(
        spark,
        [
            price("A", 1, 0, t=1.0, source_ms=990, relay_ms=1000),
            price("A", 2, 1, t=1.5, source_ms=1480, relay_ms=1500),
            price("A", 2, 2, t=2.0, source_ms=1480, relay_ms=2000),
            price("A", 4, 3, t=5.5, source_ms=5470, relay_ms=5500),
            price("B", 1, 0, t=1.0, partition=1, source_ms=995, relay_ms=1000),
        ],
    )
    raw = frame(
        spark,
        [
            price("A", s, n, t=n, topic="r", group=g)
            for n, (s, g) in enumerate(
                [(1, "p1"), (1, "p2"), (2, "p1"), (2, "p2"), (3, "p1"), (4, "p2")]
            )
        ]
        + [price("B", 1, 0, t=0, topic="r", partition=1)],
    )
    got = availability(expected_of(spark, {"A": 4, "B": 1}), prices(p), prices(raw))
    assert rows(
        got,
        "instrument",
        "expected",
        "delivered",
        "once",
        "duplicated",
        "missing",
        "unexpected",
        "out_of_order",
        "duplicates_dropped",
        "longest_silence_s",
        "silence_ended_at",
    ) == [
        ("A", 4, 4, 2, 1, 1, 0, 0, 2, 3.5, 5_500_000),
        ("B", 1, 1, 1, 0, 0, 0, 0, 0, 0.0, None),
    ]
    latency = {
        r[0]: r[1:]
        for r in rows(got, "instrument", "latency_p50_ms", "latency_p99_ms", "latency_max_ms")
    }
    assert latency["A"] == (20.0, 520.0, 520.0)
    assert latency["B"] == (5.0, 5.0, 5.0)


def test_failovers_are_changes_of_member_per_group_and_instrument(spark: SparkSession) -> None:
    """p1 hands A from a to b (hand-over = the gap between their publish stamps); p2 and B
    never change member, so they have no fail-over."""
    raw = frame(
        spark,
        [
            price("A", 1, 0, t=1, topic="r", group="p1", member="a", publish_ms=1000),
            price("A", 1, 1, t=1, topic="r", group="p2", member="c", publish_ms=1010),
            price("A", 2, 2, t=2, topic="r", group="p1", member="a", publish_ms=2000),
            price("A", 3, 3, t=6, topic="r", group="p1", member="b", publish_ms=6250),
            price("A", 2, 4, t=6, topic="r", group="p2", member="c", publish_ms=2010),
            price("A", 4, 5, t=7, topic="r", group="p1", member="b", publish_ms=7000),
            price("B", 1, 0, t=1, topic="r", partition=1, group="p1", member="b", publish_ms=1),
        ],
    )
    got = rows(
        failovers(prices(raw)),
        "group",
        "instrument",
        "from_member",
        "to_member",
        "seq",
        "at",
        "handover_s",
    )
    assert got == [("p1", "A", "a", "b", 3, 6_000_000, 4.25)]


def test_first_delivery_share_and_leadership_buckets(spark: SparkSession) -> None:
    """The group whose copy of a seq came first on prices.raw is credited; buckets count prices
    per member and second."""
    raw = prices(
        frame(
            spark,
            [
                price("A", 1, 0, t=0.1, topic="r", group="p1", member="a"),
                price("A", 1, 1, t=0.2, topic="r", group="p2", member="c"),
                price("A", 2, 2, t=0.3, topic="r", group="p2", member="c"),
                price("A", 2, 3, t=1.4, topic="r", group="p1", member="a"),
                price("A", 3, 4, t=1.5, topic="r", group="p2", member="c"),
                price("A", 4, 5, t=1.6, topic="r", group="p2", member="d"),
            ],
        )
    )
    assert rows(first_delivery_share(raw), "group", "first", "share") == [
        ("p1", 1, 0.25),
        ("p2", 3, 0.75),
    ]
    assert rows(leadership(raw), "group", "member", "bucket", "prices") == [
        ("p1", "a", 0, 1),
        ("p1", "a", 1_000_000, 1),
        ("p2", "c", 0, 2),
        ("p2", "c", 1_000_000, 1),
        ("p2", "d", 1_000_000, 1),
    ]


def test_bars_are_ohlc_by_source_time_with_duplicates_counted_once(spark: SparkSession) -> None:
    """Open/close follow seq order, not delivery order; a duplicate copy adds nothing."""
    p = frame(
        spark,
        [
            price("A", 2, 0, t=1, source_ms=2_000, mid=1.3),
            price("A", 1, 1, t=1, source_ms=1_000, mid=1.1),
            price("A", 3, 2, t=1, source_ms=9_999, mid=1.0),
            price("A", 3, 3, t=1, source_ms=9_999, mid=1.0),
            price("A", 4, 4, t=1, source_ms=10_000, mid=1.7),
            price("B", 1, 0, t=1, partition=1, source_ms=500, mid=5.0),
        ],
    )
    got = rows(
        ohlc_bars(prices(p), interval_s=10),
        "instrument",
        "bar_start",
        "open",
        "high",
        "low",
        "close",
        "prices",
        "first_seq",
        "last_seq",
    )
    assert got == [
        ("A", 0, 1.1, 1.3, 1.0, 1.0, 3, 1, 3),
        ("A", 10_000_000, 1.7, 1.7, 1.7, 1.7, 1, 4, 4),
        ("B", 0, 5.0, 5.0, 5.0, 5.0, 1, 1, 1),
    ]


def test_reconcile_and_bars_follow_epoch_then_seq_across_a_feed_restart(
    spark: SparkSession,
) -> None:
    """A restarted feed (epoch 200, seqs from 1) is neither out of order nor a duplicate."""
    fed = [quote("A", s, s, epoch=100) for s in (1, 2, 3)]
    fed += [quote("A", s, 10 + s, epoch=200) for s in (1, 2)]
    p = frame(
        spark,
        [price("A", s, s, t=s, epoch=100, mid=1.0 + s) for s in (1, 2, 3)]
        + [price("A", s, 10 + s, t=3 + s, epoch=200, mid=2.0 + s) for s in (1, 2)]
        + [price("A", 3, 20, t=9, epoch=100)],  # the old epoch again: out of order
    )
    got = rows(
        reconcile(expected(quotes(frame(spark, fed))), prices(p)),
        "instrument",
        "epoch",
        "seq",
        "status",
    )
    assert got == [("A", 100, 3, "duplicated"), ("A", 100, 3, "out_of_order")]
    bars = rows(ohlc_bars(prices(p), interval_s=60), "open", "close", "first_seq", "last_seq")
    assert bars == [(2.0, 4.0, 1, 2)]
