"""The analysis jobs: availability, reconcile, bars (the report is :mod:`.report`).

They write under an output directory ``OUT`` (the layout of its ``records`` is :mod:`.ingest`'s)::

    OUT/availability/ OUT/failovers/ OUT/leadership/ OUT/first_delivery/   availability
    OUT/reconcile/ OUT/reconcile.json                                         reconcile
    OUT/bars/date=<yyyy-mm-dd>/                                               bars
    OUT/report.html                                                           report

Every job reads ``OUT/records`` (so a report can be made after the broker is gone), or the
topics directly (batch, to their current end) when given ``source="topics"``. Reading the landed
records drops repeated ``(topic, partition, offset)``, so an ingest interrupted between writing
its files and recording its offsets costs nothing but the repeated read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from pricing_ha.config import AppConfig
from pricing_ha.pipeline import decode, delivery, failover
from pricing_ha.pipeline.bars import ohlc_bars
from pricing_ha.pipeline.ingest import ingest_topics
from pricing_ha.pipeline.kafka_reader import read_topics

__all__ = [
    "Inputs",
    "ReconcileResult",
    "availability_job",
    "bars_job",
    "load_inputs",
    "reconcile_job",
]


@dataclass(frozen=True)
class Inputs:
    """The decoded inputs of the analysis jobs."""

    quotes: DataFrame
    dead_lettered: DataFrame
    raw: DataFrame
    prices: DataFrame

    def expected(self) -> DataFrame:
        """Every ``(instrument, epoch, seq)`` that must reach ``prices`` once."""
        return delivery.expected(self.quotes, self.dead_lettered)


def load_inputs(
    spark: SparkSession, cfg: AppConfig, out: Path, *, source: str = "records"
) -> Inputs:
    """The inputs, from the landed Parquet (``source="records"``) or the topics (``"topics"``)."""
    if source == "topics":
        # One read for every input: with "latest" each action would look the end up again,
        # and quotes read before prices would not cover them.
        records = read_topics(spark, cfg.broker, ingest_topics(cfg)).localCheckpoint(eager=True)
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
            f"{'instrument':<12}{'epoch':>14}{'seq':>10}  {'status':<13}{'copies':>6}  "
            "at (partition:offset)",
        ]
        lines.extend(
            f"{r['instrument']!s:<12}{r.get('epoch', 0)!s:>14}{r['seq']!s:>10}  "
            f"{r['status']!s:<13}{r['copies']!s:>6}  "
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
        .orderBy("instrument", "epoch", "seq", "status")
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
