"""The pipeline end to end: a short real run with a fail-over, ingested, reconciled, reported."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812
from typer.testing import CliRunner

import pricing_ha.cli.pipeline  # noqa: F401 - registers ``pipeline`` on the app
from pricing_ha.cli import app
from pricing_ha.config import load_app_config
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.judging import judge
from pricing_ha.local.waiting import wait_for
from pricing_ha.pipeline.ingest import ingest_batch
from pricing_ha.pipeline.jobs import load_inputs, reconcile_job
from pricing_ha.pipeline.report import report_job
from tests.spark.session import local_spark

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """The suite's shared ``local[2]`` session."""
    return local_spark()


def run_with_one_failover(cluster: PricingCluster) -> None:
    """Feed, both groups, a relay; SIGKILL p1-a 3 s into the feed; wait until prices is whole."""
    for g in ("p1", "p2"):
        cluster.publisher(g, "a")
        cluster.publisher(g, "b")
    cluster.relay("r1")
    cluster.wait_led(["p1", "p2", "relay"])
    feed = cluster.feed(instruments=4, rate=10, duration=12)
    time.sleep(3)  # the fault's moment, not a check: p1-b must take over p1-a's partitions
    cluster.members["p1-a"].kill()
    assert feed.wait(60) == 0, feed.log_tail()
    expected = cluster.expected()
    wait_for(lambda: judge(expected, cluster.read("prices", idle_s=0.5)).ok, 60, "prices whole")


def corrupt(
    spark: SparkSession, src: Path, dst: Path, prices_topic: str
) -> tuple[tuple[str, int], tuple[str, int]]:
    """A copy of the landed records with one price dropped and another duplicated (as a new
    record at the end of its partition); returns (dropped, duplicated) as (instrument, seq)."""
    records = spark.read.parquet(str(src / "records"))
    prices = records.where((F.col("topic") == prices_topic) & F.col("key").isNotNull())
    prices = prices.withColumn(
        "_seq", F.get_json_object(F.col("value").cast("string"), "$.seq").cast("int")
    )
    prices = prices.withColumn("_instrument", F.col("key").cast("string"))
    instruments = sorted(r[0] for r in prices.select("_instrument").distinct().collect())
    drop_key = (instruments[0], 5)
    dup_key = (instruments[1], 7)

    def is_(key: tuple[str, int]):
        return (F.col("_instrument") == key[0]) & (F.col("_seq") == key[1])

    dropped = prices.where(is_(drop_key)).select("topic", "partition", "offset").collect()
    assert len(dropped) == 1
    (copy,) = prices.where(is_(dup_key)).collect()
    last = (
        records.where((F.col("topic") == prices_topic) & (F.col("partition") == copy.partition))
        .agg(F.max("offset"))
        .first()
    )
    assert last is not None
    cols = records.columns
    extra = spark.createDataFrame(
        [tuple(copy.asDict()[c] if c != "offset" else last[0] + 1 for c in cols)], records.schema
    )
    kept = records.where(
        ~(
            (F.col("topic") == prices_topic)
            & (F.col("partition") == dropped[0].partition)
            & (F.col("offset") == dropped[0].offset)
        )
    )
    kept.unionByName(extra).write.partitionBy("topic", "date").parquet(str(dst / "records"))
    return drop_key, dup_key


@pytest.mark.timeout(420)
def test_pipeline_reconciles_a_real_run_and_names_a_dropped_and_a_duplicated_price(
    cluster: PricingCluster, spark: SparkSession, tmp_path: Path
) -> None:
    """A run with a fail-over reconciles clean (from the landed records and from the topics) and
    shows the fail-over; a copy of its data with one price dropped and one duplicated fails
    reconciliation (exit 1) naming exactly those."""
    run_with_one_failover(cluster)
    cfg = load_app_config(cluster.config_path)
    out = tmp_path / "pipeline"
    t0 = time.monotonic()
    assert ingest_batch(spark, cfg, out) > 0
    # A second batch ingest finds nothing new: the offsets it recorded are the ends.
    assert ingest_batch(spark, cfg, out) == 0
    report = report_job(load_inputs(spark, cfg, out), out, bar_interval_s=5)
    result = report.verdict
    assert result.ok, result.render()
    assert result.expected == sum(cluster.expected().values())
    p1 = cluster.group("p1")
    failovers = spark.read.parquet(str(out / "failovers")).where(F.col("group") == p1)
    moves = {(r.from_member, r.to_member) for r in failovers.collect()}
    assert ("a", "b") in moves, f"the availability tables miss p1's fail-over: {moves}"
    avail = spark.read.parquet(str(out / "availability")).collect()
    assert len(avail) == 4
    assert all(r.once == r.expected and r.missing == 0 and r.duplicated == 0 for r in avail)
    # The same verdict from the topics themselves (a batch read to their current end).
    direct = reconcile_job(load_inputs(spark, cfg, out, source="topics"), tmp_path / "direct")
    assert direct.ok, direct.render()
    assert direct.expected == result.expected
    page = report.html.read_text()
    assert "<svg" in page
    assert "RECONCILE OK" in page
    print(f"pipeline jobs on the run took {time.monotonic() - t0:.1f} s")

    bad = tmp_path / "corrupted"
    dropped, duplicated = corrupt(spark, out, bad, cfg.topics.prices)
    cli = CliRunner().invoke(
        app,
        [
            "pipeline",
            "reconcile",
            "--out",
            str(bad),
            "--config",
            str(cluster.config_path),
            "--master",
            "local[2]",
        ],
    )
    assert cli.exit_code == 1, cli.output
    assert "RECONCILE FAILED" in cli.output
    offending = {
        (r["instrument"], r["seq"], r["status"])
        for r in spark.read.parquet(str(bad / "reconcile")).collect()
    }
    assert offending == {
        (*dropped, "missing"),
        (*duplicated, "duplicated"),
        (*duplicated, "out_of_order"),  # the extra copy came after later seqs
    }
    for instrument, seq in (dropped, duplicated):
        assert any(instrument in line and str(seq) in line for line in cli.output.splitlines())
