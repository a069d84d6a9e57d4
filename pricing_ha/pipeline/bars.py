"""OHLC bars per instrument per interval, from ``prices``.

A price belongs to the bar of its source time (``source_time_ns``, when the quote was made), so
bars do not move when a fail-over delays delivery. Open and close are the prices of the lowest
and highest ``(epoch, seq)`` in the bar (the source's order, across a feed restart too); a seq
delivered twice counts once.
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

__all__ = ["BAR_COLUMNS", "ohlc_bars"]

BAR_COLUMNS = [
    "instrument",
    "bar_start",
    "open",
    "high",
    "low",
    "close",
    "prices",
    "first_seq",
    "last_seq",
]


def ohlc_bars(
    prices: DataFrame, interval_s: int = 60, field: Literal["mid", "bid", "ask"] = "mid"
) -> DataFrame:
    """Columns :data:`BAR_COLUMNS`, ordered by instrument and bar start.

    Args:
        prices: :func:`pricing_ha.pipeline.decode.prices` of ``prices``.
        interval_s: bar length in seconds (bars start at multiples of it since the epoch).
        field: which price the bars follow.
    """
    if interval_s < 1:
        raise ValueError("interval_s must be at least 1")
    width_ns = interval_s * 1_000_000_000
    start_ns = F.floor(F.col("source_time_ns") / F.lit(width_ns)) * F.lit(width_ns)
    position = F.struct("epoch", "seq")  # the source's order across a feed restart
    return (
        prices.dropDuplicates(["instrument", "epoch", "seq"])
        .withColumn("bar_start", F.timestamp_micros((start_ns / F.lit(1000)).cast("bigint")))
        .groupBy("instrument", "bar_start")
        .agg(
            F.min_by(field, position).alias("open"),
            F.max(field).alias("high"),
            F.min(field).alias("low"),
            F.max_by(field, position).alias("close"),
            F.count(F.lit(1)).alias("prices"),
            F.min_by("seq", position).alias("first_seq"),
            F.max_by("seq", position).alias("last_seq"),
        )
        .select(*BAR_COLUMNS)
        .orderBy("instrument", "bar_start")
    )
