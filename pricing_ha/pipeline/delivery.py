"""Exactly-once, from the data: what the feed produced against what ``prices`` delivered.

Pure DataFrame functions over the frames of :mod:`pricing_ha.pipeline.decode`.

* :func:`expected` — every ``(instrument, epoch, seq)`` on ``md.quotes`` that a publisher did
  not dead-letter: each must reach ``prices`` exactly once.
* :func:`reconcile` — the offending rows, one per ``(instrument, epoch, seq)`` with a problem:
  ``missing`` (never delivered), ``duplicated`` (delivered more than once; ``at`` lists every
  copy as ``partition:offset``), ``unexpected`` (delivered, never quoted) or ``out_of_order``
  (delivered after a higher ``(epoch, seq)`` of its instrument). No rows means the exactly-once
  verdict holds.
* :func:`availability` — one row per instrument: the delivery counts, the longest silence on
  ``prices`` and when it ended, end-to-end latency percentiles (source time → relay time) and
  the copies the relay dropped (those on ``prices.raw`` beyond the first of each seq).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

__all__ = ["AVAILABILITY_COLUMNS", "REJECT_STATUSES", "availability", "expected", "reconcile"]

#: Every ``status`` that :func:`reconcile` may report.
REJECT_STATUSES = ("missing", "duplicated", "unexpected", "out_of_order")

AVAILABILITY_COLUMNS = [
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
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_max_ms",
]

# A source seq is (epoch, seq): a restarted feed numbers from 1 again in a new epoch.
_KEY = ["instrument", "epoch", "seq"]


def expected(quotes: DataFrame, dead_lettered: DataFrame | None = None) -> DataFrame:
    """``(instrument, epoch, seq, source_time_ns)``, once each, of the quotes that should be
    priced.

    Args:
        quotes: :func:`pricing_ha.pipeline.decode.quotes` of ``md.quotes``.
        dead_lettered: :func:`pricing_ha.pipeline.decode.dead_letter_sources` of the quotes DLQ.
    """
    if dead_lettered is not None:
        quotes = quotes.join(dead_lettered, ["partition", "offset"], "left_anti")
    return quotes.groupBy(*_KEY).agg(F.min("source_time_ns").alias("source_time_ns"))


def _copies(prices: DataFrame) -> DataFrame:
    return prices.groupBy(*_KEY).agg(
        F.count(F.lit(1)).alias("copies"),
        F.sort_array(F.collect_list(F.struct("partition", "offset"))).alias("_at"),
    )


def _with_status(expected_seqs: DataFrame, prices: DataFrame) -> DataFrame:
    copies = _copies(prices)
    return (
        expected_seqs.select(*_KEY, F.lit(True).alias("_expected"))
        .join(copies, _KEY, "full_outer")
        .select(
            *_KEY,
            F.coalesce("copies", F.lit(0)).alias("copies"),
            F.transform(
                F.coalesce("_at", F.array()),
                lambda s: F.concat_ws(
                    ":", s["partition"].cast("string"), s["offset"].cast("string")
                ),
            ).alias("at"),
            F.when(F.col("_expected").isNull(), "unexpected")
            .when(F.col("copies").isNull(), "missing")
            .when(F.col("copies") > 1, "duplicated")
            .otherwise("once")
            .alias("status"),
        )
    )


def _out_of_order(prices: DataFrame) -> DataFrame:
    order = Window.partitionBy("instrument").orderBy("partition", "offset")
    position = F.struct("epoch", "seq")  # ordered as (epoch, seq)
    return (
        prices.withColumn(
            "_highest", F.max(position).over(order.rowsBetween(Window.unboundedPreceding, -1))
        )
        .where(position < F.col("_highest"))
        .select(
            *_KEY,
            F.lit(1).cast("bigint").alias("copies"),
            F.array(
                F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string"))
            ).alias("at"),
            F.lit("out_of_order").alias("status"),
        )
    )


def reconcile(expected_seqs: DataFrame, prices: DataFrame) -> DataFrame:
    """The offending rows (see the module docstring): instrument, epoch, seq, status, copies,
    at.

    Args:
        expected_seqs: :func:`expected`.
        prices: :func:`pricing_ha.pipeline.decode.prices` of ``prices``.
    """
    bad = _with_status(expected_seqs, prices).where(F.col("status") != "once")
    return (
        bad.unionByName(_out_of_order(prices))
        .select("instrument", "epoch", "seq", "status", "copies", "at")
        .orderBy("instrument", "epoch", "seq", "status")
    )


def _silences(prices: DataFrame) -> DataFrame:
    order = Window.partitionBy("instrument").orderBy("partition", "offset")
    t = F.col("timestamp").cast("double")
    gaps = prices.select("instrument", "timestamp", (t - F.lag(t).over(order)).alias("gap"))
    return gaps.groupBy("instrument").agg(
        F.coalesce(F.max("gap"), F.lit(0.0)).alias("longest_silence_s"),
        F.max_by("timestamp", "gap").alias("silence_ended_at"),
    )


def _latency(prices: DataFrame) -> DataFrame:
    ms = (F.col("relay_ns") - F.col("source_time_ns")) / F.lit(1e6)
    pct = F.percentile_approx(ms, [0.5, 0.99], 10_000)
    return prices.groupBy("instrument").agg(
        pct[0].alias("latency_p50_ms"),
        pct[1].alias("latency_p99_ms"),
        F.max(ms).alias("latency_max_ms"),
    )


def availability(expected_seqs: DataFrame, prices: DataFrame, raw: DataFrame) -> DataFrame:
    """One row per instrument, columns :data:`AVAILABILITY_COLUMNS` (see the module docstring).

    Args:
        expected_seqs: :func:`expected`.
        prices: :func:`pricing_ha.pipeline.decode.prices` of ``prices``.
        raw: :func:`pricing_ha.pipeline.decode.prices` of ``prices.raw``.
    """
    status = _with_status(expected_seqs, prices)
    counts = status.groupBy("instrument").agg(
        F.count(F.when(F.col("status") != "unexpected", 1)).alias("expected"),
        F.sum("copies").alias("delivered"),
        *(
            F.count(F.when(F.col("status") == s, 1)).alias(s)
            for s in ("once", "duplicated", "missing", "unexpected")
        ),
    )
    disorder = (
        _out_of_order(prices).groupBy("instrument").agg(F.count(F.lit(1)).alias("out_of_order"))
    )
    dropped = raw.groupBy("instrument").agg(
        (F.count(F.lit(1)) - F.count_distinct("epoch", "seq")).alias("duplicates_dropped")
    )
    return (
        counts.join(disorder, "instrument", "left")
        .join(dropped, "instrument", "left")
        .join(_silences(prices), "instrument", "left")
        .join(_latency(prices), "instrument", "left")
        .fillna(0, ["out_of_order", "duplicates_dropped"])
        .fillna(0.0, ["longest_silence_s"])
        .select(*AVAILABILITY_COLUMNS)
        .orderBy("instrument")
    )
