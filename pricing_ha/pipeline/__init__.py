"""The data pipeline: Spark jobs (through PySpark) that prove availability from the topics.

The analytical path, never the price hot path. Modules, by the question they answer:

* :mod:`.kafka_source` / :mod:`.kafka_ranges` — reading the topics: a Python Data Source
  (format ``pricing_ha_kafka``) with the built-in connector's columns, or the built-in ``kafka``
  format when its connector is on the classpath;
* :mod:`.decode` — records → quotes, raw prices, prices (control records skipped);
* :mod:`.delivery` — expected seqs, the exactly-once reconciliation, availability per instrument;
* :mod:`.failover` — fail-overs, leadership over time, first-delivery share per group;
* :mod:`.bars` — OHLC bars;
* :mod:`.jobs` / :mod:`.report` — the ``pricing-ha pipeline`` jobs and the HTML report;
* :mod:`.session` — the SparkSession.

Every transform is a pure DataFrame → DataFrame function; only :mod:`.jobs` and
:mod:`.report` read or write files. Importing this package imports PySpark: the command line
imports it lazily, inside the ``pipeline`` commands.
"""

from __future__ import annotations

from pricing_ha.pipeline.bars import ohlc_bars
from pricing_ha.pipeline.decode import dead_letter_sources, prices, quotes
from pricing_ha.pipeline.delivery import availability, expected, reconcile
from pricing_ha.pipeline.failover import failovers, first_delivery_share, leadership
from pricing_ha.pipeline.kafka_source import KAFKA_SCHEMA, KafkaDataSource, read_topics
from pricing_ha.pipeline.session import spark_session

__all__ = [
    "KAFKA_SCHEMA",
    "KafkaDataSource",
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
]
