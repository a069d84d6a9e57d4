"""Hand-built Kafka records (the connector's columns) for the transform tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession

from pricing_ha.pipeline.kafka_reader import KAFKA_SCHEMA

#: Record times are T0 + the seconds a test gives.
T0 = datetime(2026, 1, 2, 3, 4, 0, tzinfo=UTC)
#: Source times (``source_time_ns``) are T0_NS + the milliseconds a test gives.
T0_NS = int(T0.timestamp()) * 1_000_000_000

Row = tuple[Any, ...]


def at(seconds: float) -> datetime:
    """T0 plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def quote(
    instrument: str, seq: int, offset: int, *, partition: int = 0, t: float = 0.0, epoch: int = 0
) -> Row:
    """A ``md.quotes`` record (of a feed without epochs unless ``epoch`` is given)."""
    doc: dict[str, object] = {
        "instrument": instrument,
        "seq": seq,
        "bid": 1.0,
        "ask": 1.2,
        "source_time_ns": T0_NS + int(t * 1e9),
    }
    if epoch:
        doc["epoch"] = epoch
    value = orjson.dumps(doc)
    return (instrument.encode(), value, "q", partition, offset, at(t), [])


def price(
    instrument: str,
    seq: int,
    offset: int,
    *,
    t: float,
    partition: int = 0,
    topic: str = "p",
    group: str = "p1",
    member: str = "a",
    mid: float = 1.1,
    source_ms: float | None = None,
    relay_ms: float | None = None,
    publish_ms: float | None = None,
    epoch: int = 0,
) -> Row:
    """A ``prices``/``prices.raw`` record: source time ``source_ms`` (default ``t``), relay and
    publish stamps in milliseconds after T0 (no ``epoch`` field unless ``epoch`` is given)."""
    source_ns = T0_NS + int((t * 1000 if source_ms is None else source_ms) * 1_000_000)
    doc: dict[str, object] = {
        "instrument": instrument,
        "seq": seq,
        "bid": mid - 0.1,
        "ask": mid + 0.1,
        "mid": mid,
        "source_time_ns": source_ns,
    }
    if epoch:
        doc["epoch"] = epoch
    value = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    headers = [("seq", str(seq).encode()), ("group", group.encode()), ("member", member.encode())]
    if publish_ms is not None:
        headers.append(("publish_ns", str(T0_NS + int(publish_ms * 1_000_000)).encode()))
    if relay_ms is not None:
        headers.append(("relay", b"r1"))
        headers.append(("relay_ns", str(T0_NS + int(relay_ms * 1_000_000)).encode()))
    return (instrument.encode(), value, topic, partition, offset, at(t), headers)


def control(offset: int, *, partition: int = 0, t: float = 0.0) -> Row:
    """A relay's takeover marker on ``prices``: no key, empty value."""
    return (None, b"", "p", partition, offset, at(t), [("pricing-ha-control", b"takeover")])


def frame(spark: SparkSession, rows: list[Row]) -> DataFrame:
    """The rows as a DataFrame of the connector's schema."""
    return spark.createDataFrame(
        [(*r[:6], [{"key": k, "value": v} for k, v in r[6]]) for r in rows], KAFKA_SCHEMA
    )
