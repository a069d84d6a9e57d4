"""The pipeline's jobs: ingest the topics into Parquet, then availability, reconcile, bars, report.

Layout of an output directory ``OUT``::

    OUT/records/topic=<topic>/date=<yyyy-mm-dd>/*.parquet   ingest: every record, as read
    OUT/_ingest/offsets.json     batch ingest: where the next ``--until-end`` run starts
    OUT/_checkpoint/             streaming ingest: Spark's checkpoint (offsets, commits)
    OUT/availability/ OUT/failovers/ OUT/leadership/ OUT/first_delivery/   availability
    OUT/reconcile/ OUT/reconcile.json                                         reconcile
    OUT/bars/date=<yyyy-mm-dd>/                                               bars
    OUT/report.html                                                           report

Every job after ingest reads ``OUT/records`` (so a report can be made after the broker is
gone), or the topics directly when given ``source="topics"``. Reading the landed records drops
repeated ``(topic, partition, offset)``, so an ingest interrupted between writing its files and
recording its offsets costs nothing but the repeated read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from pricing_ha.config import AppConfig
from pricing_ha.errors import PricingError
from pricing_ha.pipeline import decode, delivery, failover
from pricing_ha.pipeline.bars import ohlc_bars
from pricing_ha.pipeline.kafka_ranges import consumer_settings, end_offsets, start_offsets
from pricing_ha.pipeline.kafka_source import (
    FORMAT,
    KAFKA_COLUMNS,
    KafkaDataSource,
    builtin_kafka_available,
    msk_iam_options,
    read_topics,
)

__all__ = [
    "INGEST_ROLES",
    "IngestModeError",
    "Inputs",
    "ReconcileResult",
    "availability_job",
    "bars_job",
    "ingest_batch",
    "ingest_stream",
    "load_inputs",
    "reconcile_job",
]

#: The topics ingest lands (the NELI heartbeats are not data about prices).
INGEST_ROLES = ("quotes", "raw", "prices", "dlq", "raw_dlq")


def _topics(cfg: AppConfig) -> list[str]:
    names = cfg.topics.by_role()
    return [names[r] for r in INGEST_ROLES]


def _kafka_options(cfg: AppConfig) -> dict[str, str]:
    """The client settings the configuration adds (TLS, SASL...) as Spark reader options.

    With MSK IAM they are left to :func:`msk_iam_options` (the Java source names them
    differently, and the token callback is not text).
    """
    if cfg.broker.auth == "msk_iam":
        return {}
    return {
        k: str(v)
        for k, v in cfg.broker.client_config().items()
        if k != "bootstrap.servers" and not callable(v)
    }


def _region(cfg: AppConfig) -> str | None:
    return cfg.broker.aws_region if cfg.broker.auth == "msk_iam" else None


def _driver_settings(cfg: AppConfig) -> dict[str, Any]:
    """The driver's own consumers (start and end offsets): the service's client settings,
    token callback included."""
    return consumer_settings(cfg.broker.bootstrap_servers, cfg.broker.client_config())


def _landed(records: DataFrame) -> DataFrame:
    return records.withColumn("date", F.to_date("timestamp"))


def _one_mode(out: Path, *, streaming: bool) -> None:
    # A streaming sink's readers see only the files in its log (records/_spark_metadata), so
    # batch files added to the same directory would be invisible: one mode per directory.
    other = (out / "_ingest") if streaming else (out / "_checkpoint")
    if other.exists():
        mode = "batch (--until-end)" if streaming else "streaming"
        raise IngestModeError(f"{out} was ingested in {mode} mode; use another --out directory")


class IngestModeError(PricingError):
    """An output directory written by one ingest mode was given to the other."""


def ingest_batch(spark: SparkSession, cfg: AppConfig, out: Path) -> int:
    """Land every record from where the previous batch ingest into ``out`` stopped to the
    current end of each topic; returns the number of records written."""
    state = out / "_ingest" / "offsets.json"
    _one_mode(out, streaming=False)
    settings = _driver_settings(cfg)
    topics = _topics(cfg)
    start = json.loads(state.read_text()) if state.exists() else start_offsets(settings, topics)
    end = end_offsets(settings, topics)
    builtin = builtin_kafka_available(spark)
    if builtin:
        reader = spark.read.format("kafka").option("includeHeaders", "true")
    else:
        spark.dataSource.register(KafkaDataSource)
        reader = spark.read.format(FORMAT)
    reader = (
        reader.option("kafka.bootstrap.servers", cfg.broker.bootstrap_servers)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", json.dumps(start))
        .option("endingOffsets", json.dumps(end))
    )
    for k, v in _kafka_options(cfg).items():
        reader = reader.option(f"kafka.{k}", v)
    if (region := _region(cfg)) is not None:
        for k, v in msk_iam_options(region, builtin=builtin).items():
            reader = reader.option(k, v)
    records = _landed(reader.load().select(*KAFKA_COLUMNS)).cache()
    count = records.count()
    if count:
        records.write.mode("append").partitionBy("topic", "date").parquet(str(out / "records"))
    records.unpersist()
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps(end, sort_keys=True))
    tmp.replace(state)
    return count


def ingest_stream(
    spark: SparkSession,
    cfg: AppConfig,
    out: Path,
    *,
    should_stop: Callable[[], bool],
    trigger_s: float = 2.0,
) -> None:
    """Land the topics continuously (Structured Streaming, checkpointed in ``out/_checkpoint``)
    until ``should_stop()``; a restart resumes where the checkpoint says, losing and repeating
    nothing."""
    _one_mode(out, streaming=True)
    records = read_topics(
        spark,
        cfg.broker.bootstrap_servers,
        _topics(cfg),
        kafka_options=_kafka_options(cfg),
        streaming=True,
        msk_iam_region=_region(cfg),
    )
    query = (
        _landed(records)
        .writeStream.format("parquet")
        .option("path", str(out / "records"))
        .option("checkpointLocation", str(out / "_checkpoint"))
        .partitionBy("topic", "date")
        .trigger(processingTime=f"{trigger_s} seconds")
        .start()
    )
    try:
        while query.isActive and not should_stop():
            query.awaitTermination(1)
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the ingest stream failed: {query.exception()}")


@dataclass(frozen=True)
class Inputs:
    """The decoded inputs of the analysis jobs."""

    quotes: DataFrame
    dead_lettered: DataFrame
    raw: DataFrame
    prices: DataFrame

    def expected(self) -> DataFrame:
        """Every ``(instrument, seq)`` that must reach ``prices`` once."""
        return delivery.expected(self.quotes, self.dead_lettered)


def load_inputs(
    spark: SparkSession, cfg: AppConfig, out: Path, *, source: str = "records"
) -> Inputs:
    """The inputs, from the landed Parquet (``source="records"``) or the topics (``"topics"``)."""
    if source == "topics":
        records = read_topics(
            spark,
            cfg.broker.bootstrap_servers,
            _topics(cfg),
            kafka_options=_kafka_options(cfg),
            msk_iam_region=_region(cfg),
        )
    elif source == "records":
        path = out / "records"
        if not path.is_dir():
            raise FileNotFoundError(f"no landed records at {path}: run `pipeline ingest` first")
        records = spark.read.parquet(str(path)).dropDuplicates(["topic", "partition", "offset"])
    else:
        raise ValueError(f"source must be 'records' or 'topics', not {source!r}")
    t = cfg.topics

    def of(topic: str) -> DataFrame:
        return records.where(F.col("topic") == topic)

    return Inputs(
        quotes=decode.quotes(of(t.quotes)).cache(),
        dead_lettered=decode.dead_letter_sources(of(t.dlq)),
        raw=decode.prices(of(t.raw)).cache(),
        prices=decode.prices(of(t.prices)).cache(),
    )


def _write(df: DataFrame, path: Path, *partition_by: str) -> None:
    df.write.mode("overwrite").partitionBy(*partition_by).parquet(str(path))


def availability_job(inputs: Inputs, out: Path) -> dict[str, DataFrame]:
    """Write the availability tables; returns them (read back from Parquet, cheap to reuse)."""
    spark = inputs.prices.sparkSession
    tables = {
        "availability": delivery.availability(inputs.expected(), inputs.prices, inputs.raw),
        "failovers": failover.failovers(inputs.raw),
        "leadership": failover.leadership(inputs.raw),
        "first_delivery": failover.first_delivery_share(inputs.raw),
    }
    for name, df in tables.items():
        _write(df.coalesce(1), out / name)
    return {name: spark.read.parquet(str(out / name)) for name in tables}


@dataclass(frozen=True)
class ReconcileResult:
    """The exactly-once verdict and the rows that break it."""

    ok: bool
    expected: int
    offending: list[dict[str, object]]

    def render(self, limit: int = 50) -> str:
        """The verdict, and up to ``limit`` offending rows."""
        if self.ok:
            return f"RECONCILE OK: all {self.expected} source seqs delivered exactly once, in order"
        if not self.expected:
            return "RECONCILE FAILED: md.quotes holds no quotes to reconcile"
        lines = [
            f"RECONCILE FAILED: {len(self.offending)} offending rows "
            f"({self.expected} source seqs expected)",
            f"{'instrument':<12}{'seq':>10}  {'status':<13}{'copies':>6}  at (partition:offset)",
        ]
        lines.extend(
            f"{r['instrument']!s:<12}{r['seq']!s:>10}  {r['status']!s:<13}{r['copies']!s:>6}  "
            f"{', '.join(map(str, r['at'] or []))}"  # type: ignore[call-overload]
            for r in self.offending[:limit]
        )
        if len(self.offending) > limit:
            lines.append(f"... and {len(self.offending) - limit} more in the reconcile table")
        return "\n".join(lines)


def reconcile_job(inputs: Inputs, out: Path) -> ReconcileResult:
    """Write the offending rows (``out/reconcile``) and the verdict (``out/reconcile.json``)."""
    expected = inputs.expected().cache()
    offending = delivery.reconcile(expected, inputs.prices)
    _write(offending.coalesce(1), out / "reconcile")
    rows = [
        r.asDict()
        for r in inputs.prices.sparkSession.read.parquet(str(out / "reconcile"))
        .orderBy("instrument", "seq", "status")
        .collect()
    ]
    n = expected.count()
    result = ReconcileResult(ok=n > 0 and not rows, expected=n, offending=rows)
    (out / "reconcile.json").write_text(
        json.dumps({"ok": result.ok, "expected": n, "offending": len(rows)}, indent=2) + "\n"
    )
    return result


def bars_job(inputs: Inputs, out: Path, interval_s: int = 60) -> DataFrame:
    """Write OHLC bars (``out/bars``, partitioned by date); returns them."""
    df = ohlc_bars(inputs.prices, interval_s).withColumn("date", F.to_date("bar_start"))
    _write(df, out / "bars", "date")
    return inputs.prices.sparkSession.read.parquet(str(out / "bars"))
