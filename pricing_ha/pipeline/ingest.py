"""Ingest: the topics landed in Parquet, in batch or with Structured Streaming.

Layout of an output directory ``OUT`` (the analysis jobs of :mod:`.jobs` read ``OUT/records``)::

    OUT/records/topic=<topic>/date=<yyyy-mm-dd>/*.parquet   every record, as read
    OUT/_ingest/offsets.json     batch ingest: where the next batch ingest starts
    OUT/_checkpoint/             streaming ingest: Spark's checkpoint (offsets, commits)

Both read with Spark's ``kafka`` source (:mod:`.kafka_reader`), committed records only, and
land each record once:

* **batch** (:func:`ingest_batch`) reads from where the previous batch ingest stopped to each
  partition's current end, and records where the next one starts;
* **streaming** (:func:`ingest_stream`) runs queries with ``trigger(availableNow=True)`` over
  one checkpoint: each query lands what was committed when it started and stops, and the next
  one goes on from the checkpoint.

A directory is written by one mode only: a streaming sink's readers see only the files in its
own log (``records/_spark_metadata``), so files a batch ingest added there would be invisible.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from pricing_ha.config import AppConfig
from pricing_ha.errors import PricingError
from pricing_ha.pipeline.kafka_reader import Offsets, read_topics, stream_topics

__all__ = [
    "INGEST_ROLES",
    "IngestModeError",
    "IngestStreamError",
    "ingest_batch",
    "ingest_stream",
    "ingest_topics",
]

#: The topics ingest lands (the NELI heartbeats are not data about prices).
INGEST_ROLES = ("quotes", "raw", "prices", "dlq", "raw_dlq")

# The connector's JSON offsets: -2 is "earliest" for a partition.
_EARLIEST = -2


class IngestModeError(PricingError):
    """An output directory written by one ingest mode was given to the other."""


class IngestStreamError(PricingError):
    """A streaming ingest query failed (Spark's error is the cause)."""


def ingest_topics(cfg: AppConfig) -> list[str]:
    """The names of the topics ingest lands (:data:`INGEST_ROLES`)."""
    names = cfg.topics.by_role()
    return [names[r] for r in INGEST_ROLES]


def _landed(records: DataFrame) -> DataFrame:
    return records.withColumn("date", F.to_date("timestamp"))


def _one_mode(out: Path, *, streaming: bool) -> None:
    other = (out / "_ingest") if streaming else (out / "_checkpoint")
    if other.exists():
        mode = "batch (--until-end)" if streaming else "streaming"
        raise IngestModeError(f"{out} was ingested in {mode} mode; use another --out directory")


def _next_start(cfg: AppConfig, previous: Offsets | None, read: DataFrame) -> Offsets:
    """Where the next batch ingest starts: after the last record read from each partition.

    Offsets past that record hold nothing to read yet (the read went to the last stable
    offset; what lies between is transaction markers or aborted records), so starting there
    loses and repeats nothing. A partition nothing was ever read from starts at the earliest.
    """
    start: Offsets = {
        topic: {str(p): _EARLIEST for p in range(cfg.topics.partitions)}
        for topic in ingest_topics(cfg)
    }
    for topic, parts in (previous or {}).items():
        start.setdefault(topic, {}).update(parts)
    for row in read.groupBy("topic", "partition").agg(F.max("offset").alias("last")).collect():
        start[row["topic"]][str(row["partition"])] = row["last"] + 1
    return start


def ingest_batch(spark: SparkSession, cfg: AppConfig, out: Path) -> int:
    """Land every committed record from where the previous batch ingest into ``out`` stopped
    to the current end of each topic; returns the number of records written."""
    state = out / "_ingest" / "offsets.json"
    _one_mode(out, streaming=False)
    previous: Offsets | None = json.loads(state.read_text()) if state.exists() else None
    records = read_topics(
        spark, cfg.broker, ingest_topics(cfg), starting=previous or "earliest", ending="latest"
    )
    # Read once: with ending="latest" each action would look the end up again, and the files
    # written, the count and the next start must all come from the same read.
    read = _landed(records).localCheckpoint(eager=True)
    count = read.count()
    if count:
        read.write.mode("append").partitionBy("topic", "date").parquet(str(out / "records"))
    start = _next_start(cfg, previous, read)
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps(start, sort_keys=True))
    tmp.replace(state)
    return count


def _available_now(
    spark: SparkSession, cfg: AppConfig, out: Path, should_stop: Callable[[], bool]
) -> int:
    """One ``availableNow`` query over the checkpoint; the records it landed."""
    query = (
        _landed(stream_topics(spark, cfg.broker, ingest_topics(cfg)))
        .writeStream.format("parquet")
        .option("path", str(out / "records"))
        .option("checkpointLocation", str(out / "_checkpoint"))
        .partitionBy("topic", "date")
        .trigger(availableNow=True)
        .start()
    )
    try:
        while query.isActive and not should_stop():
            query.awaitTermination(1)
    finally:
        query.stop()
    failure = query.exception()
    if failure is not None:
        raise IngestStreamError(f"the ingest stream failed: {failure}") from failure
    # One progress entry per micro-batch; an availableNow query without a rate limit runs one.
    return sum(p.numInputRows for p in query.recentProgress)


def ingest_stream(
    spark: SparkSession,
    cfg: AppConfig,
    out: Path,
    *,
    should_stop: Callable[[], bool] | None = None,
    every_s: float = 2.0,
) -> int:
    """Land the topics with Structured Streaming, checkpointed in ``out/_checkpoint``.

    Args:
        spark: the session.
        cfg: topics and broker.
        out: the output directory.
        should_stop: without it, one ``availableNow`` query: everything committed up to now,
            from where the checkpoint says. With it, such a query every ``every_s`` seconds
            until ``should_stop()`` (a query running then is stopped; its micro-batch is
            either committed in the checkpoint or read again by the next run).
        every_s: seconds between the starts of two queries.

    Returns:
        The records landed (by completed micro-batches).

    Raises:
        IngestModeError: ``out`` was written by a batch ingest.
        IngestStreamError: a query failed.
    """
    _one_mode(out, streaming=True)
    total = 0
    while True:
        started = time.monotonic()
        total += _available_now(spark, cfg, out, should_stop or (lambda: False))
        if should_stop is None:
            return total
        while not should_stop() and time.monotonic() - started < every_s:
            time.sleep(0.1)  # pacing between queries, not a wait for a condition
        if should_stop():
            return total
