"""Rows/s of the pipeline's ingest (``pricing-ha pipeline ingest --until-end``) from the topics,
against a plain confluent-kafka consumer reading the same records in the same run.

A local Apache Kafka (one KRaft node, :class:`~pricing_ha.local.broker.LocalKafka`) gets
``--rows`` records over ``md.quotes``, ``prices.raw`` and ``prices``
(4 partitions each, 100 instruments; per source seq one quote, two raw prices with the
publishers' headers and one price, as the service writes them). Producing is not timed. Then:

* **reference**: one confluent-kafka consumer (``read_committed``, as Spark reads) assigned
  every partition of the three topics from the start reads to the end (records counted, values
  not decoded): what the broker can hand out;
* **spark**: :func:`pricing_ha.pipeline.ingest.ingest_batch` in a child process (``local[2]``):
  Spark's built-in ``kafka`` source (the ``spark-sql-kafka-0-10`` connector) reading to the
  current end, landing Parquet; the SparkSession timed apart from the ingest; the Parquet
  written is read back and counted.

The question answered: does ingest keep up with the service? Each deduplicated price is four
records on those topics, so ingest must land 4 times the service's highest sustained price rate
(``--service-prices-per-s``; the README's figure) per second.

Run: ``.venv/bin/python -m bench.pipeline`` (1M records). Fewer than 1M is a smoke run:
its JSON goes to a temporary file, never to bench/results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.common.report import code_version, foreign_processes, write
from bench.pipeline.availability import measured_child
from pricing_ha.config import AppConfig, BrokerConfig
from pricing_ha.kafka.topics import create_topics
from pricing_ha.local.broker import LocalKafka

INSTRUMENTS = 100
RECORDS_PER_PRICE = 4  # a quote, two raw copies, one deduplicated price
_SMOKE_BELOW = 1_000_000
_T0_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
_Headers = list[tuple[str, str | bytes | None]]  # what Producer.produce takes


def _config(bootstrap: str) -> AppConfig:
    return AppConfig(broker=BrokerConfig(bootstrap_servers=bootstrap))


def produce(cfg: AppConfig, rows: int) -> int:
    """About ``rows`` records over the three topics, as the service writes them."""
    t = cfg.topics
    parts = cfg.topics.partitions
    producer = Producer(
        {"bootstrap.servers": cfg.broker.bootstrap_servers, "linger.ms": 20, "acks": "all"}
    )
    n = 0
    for s in range(1, max(1, rows // (RECORDS_PER_PRICE * INSTRUMENTS)) + 1):
        for i in range(INSTRUMENTS):
            inst, part = f"I{i:03d}".encode(), i % parts
            src = _T0_NS + s * 100_000_000 + i * 1000
            quote = b'{"ask":1.2,"bid":1.0,"instrument":"%s","seq":%d,"source_time_ns":%d}' % (
                inst,
                s,
                src,
            )
            price = (
                b'{"ask":1.3,"bid":0.9,"instrument":"%s","mid":1.1,"seq":%d,"source_time_ns":%d}'
                % (inst, s, src)
            )
            out: list[tuple[str, bytes, _Headers]] = [(t.quotes, quote, [])]
            for g, lag in ((b"p1", 2_000_000), (b"p2", 3_000_000)):
                headers: _Headers = [
                    ("seq", b"%d" % s),
                    ("group", g),
                    ("member", b"a"),
                    ("publish_ns", b"%d" % (src + lag)),
                ]
                out.append((t.raw, price, headers))
            relayed: _Headers = [("relay", b"r1"), ("relay_ns", b"%d" % (src + 5_000_000))]
            out.append((t.prices, price, relayed))
            for topic, value, headers in out:
                while True:
                    try:
                        producer.produce(topic, value, inst, partition=part, headers=headers)
                        break
                    except BufferError:
                        producer.poll(0.05)
                n += 1
        producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("records left unacknowledged after 60 s")
    return n


def reference(cfg: AppConfig, expected: int) -> dict[str, Any]:
    """A plain consumer reading every record of the three topics from the start."""
    t = cfg.topics
    consumer = Consumer(
        {
            "bootstrap.servers": cfg.broker.bootstrap_servers,
            "group.id": "bench-ingest-reference",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",  # librdkafka's default, said for the record
        }
    )
    tps = [
        TopicPartition(topic, p, OFFSET_BEGINNING)
        for topic in (t.quotes, t.raw, t.prices)
        for p in range(t.partitions)
    ]
    consumer.assign(tps)
    start = time.perf_counter()
    n, eof = 0, 0
    while eof < len(tps) and time.perf_counter() - start < 600:
        for msg in consumer.consume(10_000, 1.0):
            err = msg.error()
            if err is None:
                n += 1
            elif err.code() == -191:  # _PARTITION_EOF
                eof += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return {
        "s": round(elapsed, 2),
        "records": n,
        "complete": n == expected,
        "rows_per_s": round(n / elapsed),
    }


def run_spark(bootstrap: str, master: str, out: Path) -> dict[str, Any]:
    """``ingest_batch`` into ``out`` (in this process), then the landed rows counted."""
    from pricing_ha.pipeline.ingest import ingest_batch
    from pricing_ha.pipeline.session import spark_session

    t = time.perf_counter()
    spark = spark_session(master, app_name="bench-pipeline-ingest")
    session_s = time.perf_counter() - t
    t = time.perf_counter()
    written = ingest_batch(spark, _config(bootstrap), out)
    ingest_s = time.perf_counter() - t
    landed = spark.read.parquet(str(out / "records")).count()
    spark.stop()
    return {
        "session_s": round(session_s, 2),
        "ingest_s": round(ingest_s, 2),
        "written": written,
        "landed": landed,
    }


def spark_child(bootstrap: str, master: str, out: Path) -> dict[str, Any]:
    """:func:`run_spark` in a fresh interpreter; its figures plus its peak memory."""
    argv = [sys.executable, "-m", "bench.pipeline.ingest", "--child", bootstrap]
    argv += ["--master", master, "--out", str(out)]
    return measured_child(argv, "spark ingest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--service-prices-per-s",
        type=float,
        default=7200.0,
        help="the service's highest sustained deduplicated price rate (README)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_spark(args.child, args.master, args.out)))
        return
    load_before = round(os.getloadavg()[0], 2)
    foreign = foreign_processes()
    with (
        tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp,
        LocalKafka(workdir=Path(tmp) / "kafka") as broker,
    ):
        cfg = _config(broker.bootstrap)
        create_topics(AdminClient({"bootstrap.servers": broker.bootstrap}), cfg)
        t = time.perf_counter()
        n = produce(cfg, args.rows)
        print(f"{n} records produced in {time.perf_counter() - t:.1f} s", flush=True)
        ref = reference(cfg, n)
        print(f"reference: {ref}", flush=True)
        spark = spark_child(broker.bootstrap, args.master, Path(tmp) / "landed")
        print(f"spark: {spark}", flush=True)
    needed = RECORDS_PER_PRICE * args.service_prices_per_s
    spark_rate = round(spark["written"] / spark["ingest_s"])
    figures = {
        "setup": {
            "broker": "Apache Kafka (KRaft), one local node, data on disk",
            "reader": (
                f"Spark's kafka source (spark-sql-kafka-0-10 {version('pyspark')}), read_committed"
            ),
            "topics": "md.quotes, prices.raw, prices; 4 partitions each",
            "instruments": INSTRUMENTS,
            "master": args.master,
            "code": code_version(),
            "load_average_1m_before": load_before,
            "foreign_processes_before": foreign,
        },
        "records": n,
        "reference_consumer": ref,
        "spark_ingest": {**spark, "rows_per_s": spark_rate, "complete": spark["landed"] == n},
        "spark_vs_reference_rate": round(spark_rate / ref["rows_per_s"], 3),
        "keeps_up": {
            "service_prices_per_s": args.service_prices_per_s,
            "records_per_s_needed": needed,
            "headroom": round(spark_rate / needed, 2),
        },
        "load_average_1m_after": round(os.getloadavg()[0], 2),
    }
    smoke = args.rows < _SMOKE_BELOW
    write("pipeline_ingest", figures, smoke=f"< {_SMOKE_BELOW} rows" if smoke else None)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
