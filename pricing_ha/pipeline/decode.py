"""Kafka records (the connector's columns) → typed quotes, raw prices and prices.

Pure DataFrame functions over :data:`~pricing_ha.pipeline.kafka_reader.KAFKA_SCHEMA` columns, so
they work on the Kafka source's output or the landed Parquet alike.
Values are parsed with Spark's JSON reader against the wire formats of
:mod:`pricing_ha.publishing.quotes` and :func:`pricing_ha.publishing.pricing.encode_price`;
a record that does not parse (or a control record on ``prices``: no key and the header
:data:`~pricing_ha.kafka.headers.CONTROL_HEADER`) is not a quote or a price and is dropped.

Columns out (times as ``*_ns`` epoch nanoseconds, ``timestamp`` the Kafka record time):

* :func:`quotes`: instrument, epoch, seq, bid, ask, source_time_ns, partition, offset,
  timestamp.
* :func:`prices`: instrument, epoch, seq, bid, ask, mid, source_time_ns, group, member, publish_ns,
  relay, relay_ns, partition, offset, timestamp. Used for both ``prices.raw`` (``relay`` null)
  and ``prices``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from pricing_ha.kafka.headers import CONTROL_HEADER

__all__ = ["dead_letter_sources", "header", "is_control", "prices", "quotes"]

# epoch: the feed's (docs/architecture.md, "Sequence epochs"); 0 when a record has none.
_QUOTE = (
    "instrument string, epoch bigint, seq bigint, bid double, ask double, source_time_ns bigint"
)
_PRICE = (
    "instrument string, epoch bigint, seq bigint, bid double, ask double, mid double, "
    "source_time_ns bigint"
)


def header(name: str) -> Column:
    """The text of header ``name`` (the last one if repeated, like ``header_dict``), or null."""
    found = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(name))
    return F.try_element_at(found, F.lit(-1))["value"].cast("string")


def is_control() -> Column:
    """Whether the record is a control record, not a price: no key and the control header (the
    one rule of :func:`pricing_ha.kafka.headers.is_control`)."""
    return F.col("key").isNull() & F.exists(
        F.coalesce(F.col("headers"), F.array()), lambda h: h["key"] == CONTROL_HEADER
    )


def _header_long(name: str) -> Column:
    return F.when(header(name).rlike("^[0-9]+$"), header(name).cast("bigint"))


def quotes(records: DataFrame) -> DataFrame:
    """The valid-looking quotes of ``md.quotes`` records (instrument and seq present)."""
    v = F.from_json(F.col("value").cast("string"), _QUOTE)
    return records.select(
        v["instrument"].alias("instrument"),
        F.coalesce(v["epoch"], F.lit(0).cast("bigint")).alias("epoch"),
        v["seq"].alias("seq"),
        v["bid"].alias("bid"),
        v["ask"].alias("ask"),
        v["source_time_ns"].alias("source_time_ns"),
        "partition",
        "offset",
        "timestamp",
    ).where(F.col("instrument").isNotNull() & (F.col("seq") >= 1))


def prices(records: DataFrame) -> DataFrame:
    """The prices of ``prices.raw`` or ``prices`` records, control records skipped."""
    v = F.from_json(F.col("value").cast("string"), _PRICE)
    return (
        records.where(~is_control())
        .select(
            v["instrument"].alias("instrument"),
            F.coalesce(v["epoch"], F.lit(0).cast("bigint")).alias("epoch"),
            v["seq"].alias("seq"),
            v["bid"].alias("bid"),
            v["ask"].alias("ask"),
            v["mid"].alias("mid"),
            v["source_time_ns"].alias("source_time_ns"),
            header("group").alias("group"),
            header("member").alias("member"),
            _header_long("publish_ns").alias("publish_ns"),
            header("relay").alias("relay"),
            _header_long("relay_ns").alias("relay_ns"),
            "partition",
            "offset",
            "timestamp",
        )
        .where(F.col("instrument").isNotNull() & (F.col("seq") >= 1))
    )


def dead_letter_sources(dlq_records: DataFrame) -> DataFrame:
    """``(partition, offset)`` of the quotes the publishers dead-lettered (each once)."""
    return (
        dlq_records.select(
            _header_long("source.partition").cast("int").alias("partition"),
            _header_long("source.offset").alias("offset"),
        )
        .where(F.col("partition").isNotNull() & F.col("offset").isNotNull())
        .distinct()
    )
