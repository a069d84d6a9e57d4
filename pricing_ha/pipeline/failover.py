"""Fail-overs and leadership, from the headers of ``prices.raw``.

Every raw price carries the publishing ``group`` and ``member``; the partition order of
``prices.raw`` (one instrument lives on one partition) is the order the broker took them in.

* :func:`failovers` — each change of publishing member per group and instrument: who handed
  over to whom, at which seq and time, and the hand-over time (between the last price the old
  member published and the first of the new one, by their ``publish_ns`` stamps).
* :func:`leadership` — per group, member and time bucket, how many prices it published: the
  rows of the report's leadership timeline.
* :func:`first_delivery_share` — per group, the share of seqs whose first copy on
  ``prices.raw`` was that group's.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

__all__ = ["failovers", "first_delivery_share", "leadership"]


def failovers(raw: DataFrame) -> DataFrame:
    """group, instrument, from_member, to_member, seq, at, handover_s; ordered by time.

    Args:
        raw: :func:`pricing_ha.pipeline.decode.prices` of ``prices.raw``.
    """
    order = Window.partitionBy("group", "instrument").orderBy("partition", "offset")
    return (
        raw.select(
            "group",
            "instrument",
            "seq",
            "timestamp",
            F.col("member").alias("to_member"),
            F.lag("member").over(order).alias("from_member"),
            ((F.col("publish_ns") - F.lag("publish_ns").over(order)) / F.lit(1e9)).alias(
                "handover_s"
            ),
        )
        .where(F.col("from_member").isNotNull() & (F.col("from_member") != F.col("to_member")))
        .select(
            "group",
            "instrument",
            "from_member",
            "to_member",
            "seq",
            F.col("timestamp").alias("at"),
            "handover_s",
        )
        .orderBy("at", "group", "instrument")
    )


def leadership(raw: DataFrame, bucket_s: int = 1) -> DataFrame:
    """group, member, bucket (start time), prices: who published when, in ``bucket_s`` buckets."""
    bucket = F.window("timestamp", f"{bucket_s} seconds")["start"]
    return (
        raw.groupBy("group", "member", bucket.alias("bucket"))
        .agg(F.count(F.lit(1)).alias("prices"))
        .orderBy("group", "member", "bucket")
    )


def first_delivery_share(raw: DataFrame) -> DataFrame:
    """group, first (seqs it delivered first), share (of all seqs); ordered by group."""
    order = Window.partitionBy("instrument", "epoch", "seq").orderBy("partition", "offset")
    firsts = raw.withColumn("_n", F.row_number().over(order)).where(F.col("_n") == 1)
    total = F.sum("first").over(Window.partitionBy())
    return (
        firsts.groupBy("group")
        .agg(F.count(F.lit(1)).alias("first"))
        .withColumn("share", F.col("first") / total)
        .orderBy("group")
    )
