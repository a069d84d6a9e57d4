"""Rows/s and peak memory of the pipeline's availability job (Spark, local mode), with a plain
pyarrow/pandas computation of the same metrics on the same input as the reference.

The input is generated, landed-records Parquet as ``pricing-ha pipeline ingest`` writes it: per
source seq one quote (``md.quotes``), two raw prices (``prices.raw``, groups p1 and p2) and one
price (``prices``), so ``--rows N`` is N records over the three topics, 100 instruments. 0.1% of
prices are delivered twice, so the job has duplicates to find. Generation is not timed.

Each engine runs in a child process of its own, so its peak memory (``VmHWM``, summed over the
child and its own children: Spark's JVM) is its alone. Spark's figure is the job after the
session exists (``session_s`` is reported apart); both engines read the Parquet, decode the JSON
values and compute per instrument the delivery counts, out-of-order seqs, the longest silence,
latency p50/p99/max and the raw copies dropped.

Run: ``.venv/bin/python -m bench.pipeline.availability`` (1M and 10M rows, ``local[2]``).
A run with fewer than 1M rows is a smoke run: its JSON goes to a temporary file, never to
bench/results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common.report import code_version, foreign_processes, write

INSTRUMENTS = 100
TOPICS = {"quotes": "md.quotes", "raw": "prices.raw", "prices": "prices"}
_T0_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
_SMOKE_BELOW = 1_000_000


def _peak_rss_mib(pid: int) -> float:
    """VmHWM of ``pid`` and its descendants, MiB."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo.extend(int(c) for c in children)
    return round(total / 1024, 1)


def generate(rows: int, out: Path) -> int:
    """Landed-records Parquet with about ``rows`` records; returns the exact count."""
    seqs = max(1, rows // (4 * INSTRUMENTS))
    tables: dict[str, dict[str, list[Any]]] = {
        t: {"key": [], "value": [], "partition": [], "offset": [], "timestamp": [], "headers": []}
        for t in TOPICS.values()
    }
    offsets = {t: [0] * 4 for t in TOPICS.values()}

    def add(  # noqa: PLR0917 - a local row builder
        topic: str, inst: str, part: int, value: bytes, ts_ns: int, headers: list[Any]
    ) -> None:
        tab = tables[topic]
        tab["key"].append(inst.encode())
        tab["value"].append(value)
        tab["partition"].append(part)
        tab["offset"].append(offsets[topic][part])
        offsets[topic][part] += 1
        tab["timestamp"].append(ts_ns // 1000)
        tab["headers"].append(headers)

    for i in range(INSTRUMENTS):
        inst, part = f"I{i:03d}", i % 4
        for s in range(1, seqs + 1):
            src = _T0_NS + s * 100_000_000 + i * 1000
            quote = (
                f'{{"ask":1.2,"bid":1.0,"instrument":"{inst}","seq":{s},"source_time_ns":{src}}}'
            )
            add(TOPICS["quotes"], inst, part, quote.encode(), src, [])
            price = (
                f'{{"ask":1.3,"bid":0.9,"instrument":"{inst}","mid":1.1,"seq":{s},'
                f'"source_time_ns":{src}}}'
            ).encode()
            for g, lag in (("p1", 2_000_000), ("p2", 3_000_000)):
                hdr = [
                    {"key": "seq", "value": str(s).encode()},
                    {"key": "group", "value": g.encode()},
                    {"key": "member", "value": b"a"},
                    {"key": "publish_ns", "value": str(src + lag).encode()},
                ]
                add(TOPICS["raw"], inst, part, price, src + lag, hdr)
            relay = [
                {"key": "relay", "value": b"r1"},
                {"key": "relay_ns", "value": str(src + 5_000_000).encode()},
            ]
            copies = 2 if s % 1000 == 500 else 1
            for _ in range(copies):
                add(TOPICS["prices"], inst, part, price, src + 5_000_000, relay)
    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )
    total = 0
    for topic, cols in tables.items():
        d = out / "records" / f"topic={topic}" / "date=2026-01-01"
        d.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pydict(cols, schema=schema)
        pq.write_table(table, d / "part-0.parquet")
        total += table.num_rows
    return total


def run_spark(data: Path, master: str) -> dict[str, Any]:
    """The availability job on the generated records (in this process)."""
    from pricing_ha.config import AppConfig, TopicsConfig
    from pricing_ha.pipeline.jobs import availability_job, load_inputs
    from pricing_ha.pipeline.session import spark_session

    t = time.perf_counter()
    spark = spark_session(master, app_name="bench-pipeline-availability")
    session_s = time.perf_counter() - t
    cfg = AppConfig(
        topics=TopicsConfig(quotes=TOPICS["quotes"], raw=TOPICS["raw"], prices=TOPICS["prices"])
    )
    t = time.perf_counter()
    tables = availability_job(load_inputs(spark, cfg, data), data / "out-spark")
    instruments = tables["availability"].count()
    elapsed = time.perf_counter() - t
    spark.stop()
    return {
        "session_s": round(session_s, 2),
        "job_s": round(elapsed, 2),
        "instruments": instruments,
    }


def run_pandas(data: Path) -> dict[str, Any]:
    """The same per-instrument metrics with pyarrow + pandas (in this process)."""
    import orjson
    import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in the dev deps

    t = time.perf_counter()

    def load(topic: str) -> pd.DataFrame:
        table = pq.read_table(data / "records" / f"topic={topic}")
        values = [orjson.loads(v) for v in table.column("value").to_pylist()]
        df = pd.DataFrame(values)
        df["partition"] = table.column("partition").to_numpy()
        df["offset"] = table.column("offset").to_numpy()
        df["ts"] = table.column("timestamp").cast(pa.int64()).to_numpy() / 1e6
        if topic == TOPICS["prices"]:
            relay = [
                next((int(h["value"]) for h in hs if h["key"] == "relay_ns"), None)
                for hs in table.column("headers").to_pylist()
            ]
            df["relay_ns"] = relay
        return df

    quotes, raw, prices = load(TOPICS["quotes"]), load(TOPICS["raw"]), load(TOPICS["prices"])
    expected = quotes[["instrument", "seq"]].drop_duplicates()
    copies = prices.groupby(["instrument", "seq"]).size().rename("copies").reset_index()
    status = expected.merge(copies, how="outer", on=["instrument", "seq"], indicator=True)
    prices = prices.sort_values(["instrument", "partition", "offset"])
    g = prices.groupby("instrument")
    prices["gap"] = g["ts"].diff()
    prices["disorder"] = prices["seq"] < g["seq"].cummax().groupby(prices["instrument"]).shift()
    prices["lat_ms"] = (prices["relay_ns"] - prices["source_time_ns"]) / 1e6
    out = pd.DataFrame(
        {
            "expected": status[status["_merge"] != "right_only"].groupby("instrument").size(),
            "missing": status[status["_merge"] == "left_only"].groupby("instrument").size(),
            "duplicated": status[status["copies"] > 1].groupby("instrument").size(),
            "out_of_order": prices.groupby("instrument")["disorder"].sum(),
            "longest_silence_s": prices.groupby("instrument")["gap"].max(),
            "p50": prices.groupby("instrument")["lat_ms"].quantile(0.5),
            "p99": prices.groupby("instrument")["lat_ms"].quantile(0.99),
            "max": prices.groupby("instrument")["lat_ms"].max(),
            "dropped": raw.groupby("instrument").size()
            - raw.groupby("instrument")["seq"].nunique(),
        }
    ).fillna(0)
    out.to_parquet(data / "out-pandas.parquet")
    return {"job_s": round(time.perf_counter() - t, 2), "instruments": len(out)}


def measured_child(argv: list[str], what: str) -> dict[str, Any]:
    """Run ``argv`` (a Python child printing its figures as JSON on its last line); its
    figures plus its peak memory (``peak_rss_mib``, the child and its own children)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _peak_rss_mib(proc.pid))
        time.sleep(0.2)
    stdout = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode})")
    figures: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    figures["peak_rss_mib"] = peak
    return figures


def child(engine: str, data: Path, master: str) -> dict[str, Any]:
    """Run one engine in a fresh interpreter; its figures plus its peak memory."""
    argv = [sys.executable, "-m", "bench.pipeline.availability", "--child", engine]
    argv += ["--data", str(data), "--master", master]
    return measured_child(argv, f"{engine} run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--child", choices=["spark", "pandas"], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = (
            run_spark(args.data, args.master) if args.child == "spark" else run_pandas(args.data)
        )
        print(json.dumps(result))
        return
    load_before = round(os.getloadavg()[0], 2)
    foreign = foreign_processes()
    runs = []
    for rows in args.rows:
        with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
            data = Path(tmp)
            t = time.perf_counter()
            n = generate(rows, data)
            print(f"{n} rows generated in {time.perf_counter() - t:.1f} s", flush=True)
            spark = child("spark", data, args.master)
            pandas = child("pandas", data, args.master)
        run = {
            "rows": n,
            "spark": {**spark, "rows_per_s": round(n / spark["job_s"])},
            "pandas": {**pandas, "rows_per_s": round(n / pandas["job_s"])},
            "spark_vs_pandas_time": round(spark["job_s"] / pandas["job_s"], 2),
        }
        print(json.dumps(run), flush=True)
        runs.append(run)
    smoke = min(args.rows) < _SMOKE_BELOW
    figures = {
        "master": args.master,
        "instruments": INSTRUMENTS,
        "code": code_version(),
        "load_average_1m_before": load_before,
        "foreign_processes_before": foreign,
        "runs": runs,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
    }
    write("pipeline_availability", figures, smoke=f"< {_SMOKE_BELOW} rows" if smoke else None)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
