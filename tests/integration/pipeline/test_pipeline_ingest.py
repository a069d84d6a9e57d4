"""Streaming ingest: ``availableNow`` queries over one checkpoint land each record once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pricing_ha.config import load_app_config
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.pipeline.ingest import IngestModeError, ingest_batch, ingest_stream
from tests.integration.pipeline.test_pipeline_reader import landed_keys, produce, transaction
from tests.spark.session import local_spark

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """The suite's shared ``local[2]`` session."""
    return local_spark()


def test_a_restarted_stream_reads_only_what_is_new(
    cluster: PricingCluster, spark: SparkSession, tmp_path: Path
) -> None:
    """A second availableNow run over the checkpoint lands exactly the records committed since
    the first (nothing lost, nothing repeated, an aborted transaction skipped); a third, with
    nothing new, lands nothing."""
    cfg = load_app_config(cluster.config_path)
    b, quotes, parts = cfg.broker.bootstrap_servers, cfg.topics.quotes, cfg.topics.partitions
    out = tmp_path / "ingest"
    produce(b, quotes, [f"q{i}" for i in range(40)], partitions=parts)
    assert ingest_stream(spark, cfg, out) == 40

    transaction(b, quotes, [f"a{i}" for i in range(5)], commit=False, partitions=parts)
    produce(b, quotes, [f"q{i}" for i in range(40, 60)], partitions=parts)
    produce(b, cfg.topics.prices, ["p0", "p1"], partitions=parts)
    assert ingest_stream(spark, cfg, out) == 22
    assert ingest_stream(spark, cfg, out) == 0

    landed = spark.read.parquet(str(out / "records"))
    values = sorted(r.value.decode() for r in landed.collect())
    assert values == sorted([f"q{i}" for i in range(60)] + ["p0", "p1"])
    keys = landed_keys(spark, out)
    assert len(keys) == len(set(keys)) == 62
    # The directory is the stream's now: a batch ingest would write files its readers ignore.
    with pytest.raises(IngestModeError):
        ingest_batch(spark, cfg, out)
