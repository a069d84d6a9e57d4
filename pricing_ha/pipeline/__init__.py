"""The data pipeline: Spark jobs (through PySpark) that prove availability from the topics.

The analytical path, never the price hot path. Modules, by the question they answer:

* :mod:`.kafka_reader` — reading the topics with Spark's ``kafka`` source (committed records,
  headers included), batch or streaming;
* :mod:`.ingest` — the topics landed in Parquet: batch to the current end, or Structured
  Streaming over a checkpoint;
* :mod:`.decode` — records → quotes, raw prices, prices (control records skipped);
* :mod:`.delivery` — expected seqs, the exactly-once reconciliation, availability per instrument;
* :mod:`.failover` — fail-overs, leadership over time, first-delivery share per group;
* :mod:`.bars` — OHLC bars;
* :mod:`.jobs` / :mod:`.report` — the analysis jobs and the HTML report;
* :mod:`.session` — the SparkSession, with the connector's jars.

Every transform is a pure DataFrame → DataFrame function; only :mod:`.ingest`, :mod:`.jobs`
and :mod:`.report` read or write files. Importing this package imports PySpark: the command line
imports it lazily, inside the ``pipeline`` commands.
"""

from __future__ import annotations

from pricing_ha.pipeline.bars import ohlc_bars
from pricing_ha.pipeline.decode import dead_letter_sources, prices, quotes
from pricing_ha.pipeline.delivery import availability, expected, reconcile
from pricing_ha.pipeline.failover import failovers, first_delivery_share, leadership
from pricing_ha.pipeline.kafka_reader import KAFKA_SCHEMA, read_topics, stream_topics
from pricing_ha.pipeline.session import spark_session

__all__ = [
    "KAFKA_SCHEMA",
    "availability",
    "dead_letter_sources",
    "expected",
    "failovers",
    "first_delivery_share",
    "leadership",
    "ohlc_bars",
    "prices",
    "quotes",
    "read_topics",
    "reconcile",
    "spark_session",
    "stream_topics",
]
