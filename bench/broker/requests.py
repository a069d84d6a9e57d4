"""Which requests the broker answers, per API and per client, and what its CPU follows.

Why: the broker's CPU at 1,000 prices/s is several times the goal of a quarter of a core,
and its profile has no hot spot; it follows the request rate, not the bytes. This benchmark
counts the requests by API (PRODUCE, FETCH, END_TXN...) and by client (``clientId``: the
publishers' quote consumers, the relays' standby tails, NELI's heartbeat readers...), so
that what would move the broker's CPU can be named and sized.

Method, per variant (the feed at 1 and 100 instruments, 10 Hz each: 10 and 1,000 prices/s;
the pipeline of ``bench.broker.load``: one local node, ``p1`` and ``p2`` with one member
each, relays ``r1`` and ``r2``): a fresh broker and pipeline; after ``--settle`` seconds the
broker's CPU over ``--window`` seconds with the request log off; then the request log is
switched on (``kafka.request.logger`` at DEBUG: the broker reads its log4j file again each
second) and every request completed in the next ``--window`` seconds is counted, with the
time its handler thread spent on it (``localTimeMs``). Logging costs the broker CPU, which is
why the CPU is taken first, with it off. The reference, in the same run, is the 10 prices/s
variant: the requests a pipeline makes whatever the price rate (heartbeats, idle fetches).

Run alone: ``python -m bench.broker.requests`` (writes bench/results/broker_requests.json).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common.cluster import start_feed, start_pipeline
from bench.common.procstat import cpu_s, load
from bench.common.report import code_version, foreign_processes, write
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.procs import ProcessGroup

TICK_S = 0.1
_QUIET = "      - name: kafka.request.logger\n        level: WARN"
_LOUD = "      - name: kafka.request.logger\n        level: DEBUG"
_LINE = re.compile(
    r"^\[([\d-]+ [\d:,]+)\] DEBUG Completed request:(\{.*\}) \(kafka\.request\.logger\)$"
)
# A client id's instance part (a partition, a member, a node number) is dropped, so that the
# same role in both groups or relays counts as one: relay-r1-prices-0 -> relay-rN-prices-N.
_INSTANCE = re.compile(r"(?<=[-/])(r|p)?\d+\b")
_UID = re.compile(r"-[0-9a-f]{8}\b")  # a benchmark cluster's unique suffix of group names


def client_role(client_id: str) -> str:
    """``client_id`` with its instance numbers replaced by ``N`` (``relay-r1-raw`` ->
    ``relay-rN-raw``)."""
    return _INSTANCE.sub(lambda m: f"{m.group(1) or ''}N", _UID.sub("", client_id))


def count_requests(log: str, lo: datetime, hi: datetime) -> dict[str, Any]:
    """Requests completed in [lo, hi) in a broker log: per API and per (client role, API),
    with the handler thread's milliseconds."""
    apis: Counter[str] = Counter()
    local_ms: dict[str, float] = {}
    clients: Counter[tuple[str, str]] = Counter()
    for line in log.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        when = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if not lo <= when < hi:
            continue
        record = json.loads(m.group(2))
        header = record["requestHeader"]
        api = header["requestApiKeyName"]
        apis[api] += 1
        local_ms[api] = local_ms.get(api, 0.0) + float(record.get("localTimeMs", 0.0))
        clients[(client_role(str(header.get("clientId", ""))), api)] += 1
    return {"apis": apis, "local_ms": local_ms, "clients": clients}


def _rates(counts: Counter[Any], seconds: float, top: int | None = None) -> dict[str, float]:
    def name(key: Any) -> str:
        return key if isinstance(key, str) else " ".join(key)

    return {name(k): round(v / seconds, 1) for k, v in counts.most_common(top)}


def run(instruments: int, settle_s: float, window_s: float) -> dict[str, Any]:
    """One variant on a fresh broker: CPU with the request log off, then the requests."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-broker-requests-"))
    with LocalKafka() as broker, ProcessGroup(workdir / "logs") as procs:
        cluster = start_pipeline(procs, broker.bootstrap, workdir, 1)
        start_feed(cluster, instruments=instruments, rate_hz=1 / TICK_S, duration_s=3600)
        time.sleep(settle_s)
        load_before = load()
        before, began = cpu_s(broker.pid), time.monotonic()
        time.sleep(window_s)
        took = time.monotonic() - began
        cpu_pct = 100 * (cpu_s(broker.pid) - before) / took
        config = broker.log4j_config.read_text(encoding="utf-8")
        broker.log4j_config.write_text(config.replace(_QUIET, _LOUD), encoding="utf-8")
        time.sleep(3.0)  # log4j looks at the file each second
        lo = datetime.now()
        time.sleep(window_s)
        hi = datetime.now()
        broker.log4j_config.write_text(config, encoding="utf-8")
        log_path = broker.nodes[0].log_path
        counted = count_requests(log_path.read_text(errors="replace"), lo, hi)
        seconds = (hi - lo).total_seconds()
        total = sum(counted["apis"].values())
        return {
            "instruments": instruments,
            "prices_per_s": round(instruments / TICK_S),
            "broker_cpu_percent_of_a_core": round(cpu_pct, 1),
            "load_average_1m": {"window_start": load_before, "window_end": load()},
            "requests_per_s": round(total / seconds, 1),
            "per_api_per_s": _rates(counted["apis"], seconds),
            "handler_ms_per_s_by_api": _rates(Counter(counted["local_ms"]), seconds),
            "per_client_per_s": _rates(counted["clients"], seconds, top=30),
        }


def main() -> None:
    """Run 10 and 1,000 prices/s; write bench/results/broker_requests.json."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before measuring")
    parser.add_argument("--window", type=float, default=20.0, help="seconds per measurement")
    parser.add_argument("--out", type=Path, default=None, help="write here instead")
    args = parser.parse_args()
    began = time.monotonic()
    setup = {
        "pipeline": "local Apache Kafka, one node; p1 and p2 with one member each; relays r1"
        " and r2; feed at 10 Hz per instrument on 4 partitions",
        "code": code_version(),
        "load_average_1m_at_start": load(),
        "foreign_processes_at_start": foreign_processes(),
    }
    variants = []
    for instruments in (1, 100):
        print(f"{instruments / TICK_S:g} prices/s", flush=True)
        variants.append(run(instruments, args.settle, args.window))
    floor, busy = variants
    added = busy["requests_per_s"] - floor["requests_per_s"]
    rate = busy["prices_per_s"] - floor["prices_per_s"]
    figures: dict[str, Any] = {
        "setup": setup,
        "variants": variants,
        "reference": "the 10 prices/s variant: requests made whatever the price rate",
        "requests_per_price_beyond_the_reference": round(added / rate, 2),
        "wall_time_s": round(time.monotonic() - began, 1),
    }
    for v in variants:
        print(
            f"{v['prices_per_s']:>6} prices/s: broker {v['broker_cpu_percent_of_a_core']} % "
            f"of a core, {v['requests_per_s']} requests/s {v['per_api_per_s']}"
        )
    write("broker_requests", figures, None if args.out is None else args.out.resolve())


if __name__ == "__main__":
    main()
