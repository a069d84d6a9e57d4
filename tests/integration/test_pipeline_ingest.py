"""Streaming ingest: checkpointed, so a restart neither loses nor repeats a record.

Marked ``slow`` (scripts/slow-tests): two streaming queries cost ~40 s on 2 cores, beyond the
default suite's budget for Spark; batch ingest is covered by test_pipeline_e2e.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from pricing_ha.config import AppConfig, load_app_config
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.pipeline.jobs import ingest_stream
from tests.spark.session import local_spark

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """The suite's shared ``local[2]`` session."""
    return local_spark()


def produce(cfg: AppConfig, first: int, n: int) -> None:
    """``n`` quotes-topic records over every partition, multi-record batches included."""
    producer = Producer({"bootstrap.servers": cfg.broker.bootstrap_servers, "linger.ms": 100})
    for i in range(first, first + n):
        producer.produce(
            cfg.topics.quotes, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 4
        )
    assert producer.flush(30) == 0


def files_rows(path: Path) -> int:
    """Rows in the Parquet files under ``path`` (cheaper to poll than a Spark job; a file still
    being written counts as empty until it is whole)."""
    total = 0
    for f in path.glob("topic=*/date=*/*.parquet"):
        try:
            total += pq.ParquetFile(f).metadata.num_rows
        except (OSError, ValueError):
            continue
    return total


def stream_until(spark: SparkSession, cfg: AppConfig, out: Path, rows: int) -> int:
    """Run the streaming ingest until ``rows`` records are landed (or 90 s); stop it; return the
    count Spark reads back (only batches the sink committed)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            ingest_stream(spark, cfg, out, should_stop=stop.is_set, trigger_s=0.5)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 90
    landed = 0
    try:
        while time.monotonic() < deadline and not errors:
            landed = files_rows(out / "records")
            if landed >= rows:
                break
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors
    assert not thread.is_alive(), "the ingest stream did not stop"
    return spark.read.parquet(str(out / "records")).count() if landed else 0


def test_streaming_ingest_restarts_without_losing_or_repeating(
    cluster: PricingCluster, spark: SparkSession, tmp_path: Path
) -> None:
    """Two runs of the stream over one checkpoint land every record once: the second starts
    where the first's checkpoint ended."""
    cfg = load_app_config(cluster.config_path)
    out = tmp_path / "ingest"
    produce(cfg, 0, 40)
    assert stream_until(spark, cfg, out, 40) == 40
    produce(cfg, 40, 20)
    assert stream_until(spark, cfg, out, 60) == 60
    landed = spark.read.parquet(str(out / "records"))
    keys = {r.key.decode() for r in landed.select("key").collect()}
    assert keys == {f"k{i}" for i in range(60)}
    assert landed.select("topic", "partition", "offset").distinct().count() == 60
