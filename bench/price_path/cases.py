"""One case of ``bench/price_path/line_rate.py``: the product's price path or its reference, run
once.

A case starts a fresh path (its own topics and processes) on the shared broker, feeds it with
``pricing-ha feed`` and measures it; the caller deletes the topics afterwards
(:func:`drop_topics`), once it has judged the output.

* ``product``: :func:`bench.common.cluster.start_pipeline` (publishers ``p1/a`` and ``p2/a``, relays
  ``r1`` and ``r2``, on ``md.quotes`` -> ``prices.raw`` -> ``prices``);
* ``reference``: topics ``ref.quotes.<uid>``, ``ref.raw.<uid>``, ``ref.prices.<uid>`` with
  the product's partition count, two ``forwarder publish`` processes (``p1``, ``p2``) and
  one ``forwarder relay --keep p1``. The feed is the same command, pointed at
  ``ref.quotes.<uid>`` with ``PRICING_HA__TOPICS__QUOTES``.

Measurements: records counted by consuming the topics (:class:`bench.common.cluster.TopicCounter`),
CPU and memory of every process from ``/proc`` (:class:`bench.common.procstat.ProcSampler`), latency
with ``bench.price_path.latency_probe`` (the same probe for both paths).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common.cluster import TopicCounter, feed_and_wait, start_feed, start_pipeline
from bench.common.procstat import ProcSampler, load
from bench.common.report import foreign_processes
from pricing_ha.local.cluster import PricingCluster, read_topic
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.tails import exactly_once
from pricing_ha.local.waiting import wait_until

# The helper processes, run as modules (the benchmark runs from the repository root).
FORWARDER = "bench.price_path.forwarder"
PROBE = "bench.price_path.latency_probe"
HOP_PROBE = "bench.price_path.hop_probe"
#: One broker hop is measured beside every latency case, on a topic of its own, at this rate
#: (low, so that it adds next to nothing to the load it measures under).
HOP_RATE_PER_S = 100.0
WARM_S = 3.0  # a case's steady window starts this long after the feed was started
#: Which processes make up each role, per path (CPU per price is reported per process and role).
ROLES = {
    "product": {"publisher": ["p1-a", "p2-a"], "relay": ["relay-r1", "relay-r2"]},
    "reference": {"publisher": ["fwd-p1", "fwd-p2"], "relay": ["fwd-relay"]},
}


@dataclass
class PathRun:
    """A started path: its topics, its processes, and the cluster whose feed drives it."""

    kind: str
    cluster: PricingCluster
    quotes: str
    out: str
    topics: list[str]
    workers: dict[str, Proc] = field(default_factory=dict)


def _create_topics(bootstrap: str, topics: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})  # outlives the futures
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
    for future in futures.values():
        future.result(30)


def drop_topics(bootstrap: str, topics: list[str]) -> bool:
    """Delete a finished case's topics (best effort: whether the broker said it did)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    try:
        for future in admin.delete_topics(topics, operation_timeout=15).values():
            future.result(30)
    except Exception as exc:  # noqa: BLE001 - a leftover topic only costs broker memory
        print(f"  (could not delete {len(topics)} topics: {exc})", flush=True)
        return False
    return True


def start_product(procs: ProcessGroup, bootstrap: str, workdir: Path, partitions: int) -> PathRun:
    """The product: both publishing groups (one member each) and two relays, all leading."""
    cluster = PricingCluster(procs, bootstrap, workdir, partitions=partitions)
    cluster.create_topics()
    start_pipeline(procs, bootstrap, workdir, cluster=cluster)
    workers = {name: cluster.members[name] for name in ROLES["product"]["publisher"]}
    workers |= {name: cluster.members[name] for name in ROLES["product"]["relay"]}
    return PathRun(
        "product",
        cluster,
        cluster.topics["quotes"],
        cluster.topics["prices"],
        list(cluster.topics.values()),
        workers,
    )


def start_reference(
    procs: ProcessGroup, bootstrap: str, workdir: Path, partitions: int, *, pipelined: bool
) -> PathRun:
    """The reference: fresh ``ref.*`` topics, two forwarding publishers, a forwarding relay."""
    cluster = PricingCluster(procs, bootstrap, workdir, partitions=partitions)  # feed config
    quotes, raw, out = (f"ref.{name}.{cluster.uid}" for name in ("quotes", "raw", "prices"))
    _create_topics(bootstrap, [quotes, raw, out], partitions)
    cluster.env["PRICING_HA__TOPICS__QUOTES"] = quotes
    run = PathRun("reference", cluster, quotes, out, [quotes, raw, out])
    # The same loop shape as the product's: publishers do not flush per batch (they commit
    # as acknowledgements settle); the relay flushes per batch unless ``pipelined``.
    mode = ["--pipelined"] if pipelined else []
    py, n = sys.executable, str(partitions)
    fwd = ["-m", FORWARDER]
    for group in ("p1", "p2"):
        run.workers[f"fwd-{group}"] = procs.spawn(
            f"fwd-{group}",
            [py, *fwd, "publish", bootstrap, quotes, raw, n, f"--name={group}", "--pipelined"],
        )
    run.workers["fwd-relay"] = procs.spawn(
        "fwd-relay", [py, *fwd, "relay", bootstrap, raw, out, n, "--keep=p1", *mode]
    )

    def ready() -> bool:
        for proc in run.workers.values():
            assert proc.alive(), proc.log_tail()
        return all("ready" in p.log_path.read_text(errors="replace") for p in run.workers.values())

    if not wait_until(ready, 60):
        raise AssertionError("the forwarders did not start")
    return run


def start_path(
    kind: str,
    procs: ProcessGroup,
    bootstrap: str,
    workdir: Path,
    *,
    partitions: int,
    pipelined: bool,
) -> PathRun:
    """Start the product's path or the reference (``kind``)."""
    if kind == "product":
        return start_product(procs, bootstrap, workdir, partitions)
    return start_reference(procs, bootstrap, workdir, partitions, pipelined=pipelined)


def cpu_figures(
    kind: str, sampler: ProcSampler, counter: TopicCounter, out: str, *, lo: float, hi: float
) -> dict[str, Any]:
    """CPU per price of each process and role over [lo, hi], against the prices delivered."""
    window = sampler.window(lo, hi)
    per: dict[str, float | None] = {}
    share: dict[str, float] = {}
    for name, (ta, tb, seconds) in window.items():
        prices = counter.count_at(out, tb) - counter.count_at(out, ta)
        per[name] = round(seconds / prices * 1e6, 1) if prices else None
        share[name] = round(seconds / (tb - ta) * 100, 1)
    roles = ROLES[kind]

    def role_sum(names: list[str]) -> float | None:
        values = [per.get(n) for n in names]
        return round(sum(v for v in values if v is not None), 1) if None not in values else None

    pub = role_sum(roles["publisher"])
    return {
        "window_s": round(hi - lo, 2),
        "prices_in_window": counter.count_at(out, hi) - counter.count_at(out, lo),
        "cpu_percent_of_a_core": share,
        "cpu_us_per_price": per,
        "cpu_us_per_price_by_role": {
            "publisher_each": None if pub is None else round(pub / len(roles["publisher"]), 1),
            "relay_all": role_sum(roles["relay"]),
            "broker": per.get("broker"),
            "feed": per.get("feed"),
        },
    }


def memory_figures(kind: str, sampler: ProcSampler) -> dict[str, Any]:
    """Each process's VmRSS / VmHWM (MiB) at the case's end, and the peak per role."""
    mib = {
        name: {k: round(v / 1024, 1) for k, v in m.items()} for name, m in sampler.memory.items()
    }
    roles = {**ROLES[kind], "broker": ["broker"], "feed": ["feed"]}
    peak = {
        role: max((mib[n].get("VmHWM", 0.0) for n in names if n in mib), default=None)
        for role, names in roles.items()
    }
    return {"per_process_mib": mib, "peak_hwm_mib_by_role": peak}


def ladder_step(
    kind: str,
    bootstrap: str,
    broker_pid: int,
    workdir: Path,
    *,
    rate: float,
    step_s: float,
    instruments: int,
    partitions: int,
    pipelined: bool,
) -> tuple[dict[str, Any], PathRun]:
    """Feed ``rate`` quotes/s for ``step_s`` into a fresh path; does its output keep up?"""
    n = int(rate * step_s)
    with ProcessGroup(workdir / "logs") as procs:
        began = time.monotonic()
        run = start_path(
            kind, procs, bootstrap, workdir, partitions=partitions, pipelined=pipelined
        )
        startup_s = time.monotonic() - began
        sampler = ProcSampler({"broker": broker_pid} | {k: p.pid for k, p in run.workers.items()})
        counter = TopicCounter(bootstrap, [run.quotes, run.out], partitions)
        try:
            load_before = load()
            t0, feed_end = feed_and_wait(run.cluster, sampler, instruments, rate, n)
            complete = counter.wait_for(run.out, n, timeout_s=60, stall_s=10)
            load_after = load()
        finally:
            counter.close()
            sampler.close()
    # Steady state: from WARM_S after the feed started to its exit, the output's growth against
    # the quotes' (what the feed really sent: it may fall behind its schedule).
    first = counter.reached(run.quotes, 1)
    lo_t = t0 + WARM_S
    span = feed_end - lo_t
    grew = counter.count_at(run.out, feed_end) - counter.count_at(run.out, lo_t)
    sent = counter.count_at(run.quotes, feed_end) - counter.count_at(run.quotes, lo_t)
    done = counter.reached(run.out, n)
    drain = None if done is None else max(0.0, done - feed_end)
    behind = n - counter.count_at(run.out, feed_end)
    # The feed's own pace: to its last quote's landing, not to its exit (which follows its
    # final flush and summary).
    last_quote = counter.reached(run.quotes, n) or feed_end
    feed_pace = (n - counter.count_at(run.quotes, lo_t)) / max(1e-3, last_quote - lo_t)
    failed = [
        reason
        for reason, ok in (
            ("output grew < 95 % of quotes sent", grew >= 0.95 * sent),
            ("more than R / 2 behind at the feed's exit", behind <= 0.5 * rate),
            ("not drained within 1 s", drain is not None and drain <= 1),
            # R was not offered: a limit of the feed (or of the machine), not of the path.
            ("feed behind its schedule", feed_pace >= 0.95 * rate),
        )
        if not ok
    ]
    out: dict[str, Any] = {
        "offered_per_s": rate,
        "quotes": n,
        "startup_s": round(startup_s, 1),
        "feed_s": round(feed_end - t0, 2),
        "first_quote_after_s": None if first is None else round(first - t0, 2),
        "last_quote_after_s": round(last_quote - t0, 2),
        "quotes_per_s_steady": round(sent / span),
        "prices_per_s_steady": round(grew / span),
        "behind_at_feed_exit": behind,
        "drain_after_feed_exit_s": None if drain is None else round(drain, 2),
        "complete": complete,
        "feed_pace_per_s": round(feed_pace),
        "sustained": not failed,
        "failed_because": failed,
        "load_average_1m_before": load_before,
        "load_average_1m_after": load_after,
        "foreign_processes_after": len(foreign_processes()),
        "cpu": cpu_figures(kind, sampler, counter, run.out, lo=lo_t, hi=feed_end),
        "forwarders": forwarder_counts(run),
        "memory": memory_figures(kind, sampler),
    }
    print(
        f"    {kind} {rate:.0f}/s: sustained={out['sustained']} "
        f"steady {out['prices_per_s_steady']}/s of {out['quotes_per_s_steady']}/s sent, "
        f"behind {behind}, drain {out['drain_after_feed_exit_s']} s, "
        f"load {load_before}->{load_after}{' ' + '; '.join(failed) if failed else ''}",
        flush=True,
    )
    return out, run


def forwarder_counts(run: PathRun) -> dict[str, Any] | None:
    """The reference forwarders' exit lines (records, batches), once they have stopped."""
    if run.kind != "reference":
        return None
    out: dict[str, Any] = {}
    for name, proc in run.workers.items():
        lines = proc.log_path.read_text(errors="replace").strip().splitlines()
        try:
            out[name] = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            out[name] = {"exit_code": proc.popen.returncode, "log_tail": proc.log_tail(5)}
    return out


def check_output(run: PathRun) -> dict[str, Any]:
    """Once per search: the product's exactly-once verdict, or the reference's distinct count."""
    if run.kind == "product":
        return {"kind": "exactly_once", **exactly_once(run.cluster)}
    expected = sum(run.cluster.expected().values())
    records = read_topic(run.cluster.bootstrap, run.out, run.cluster.partitions)
    distinct = len({(r.key, r.value) for r in records})
    return {
        "kind": "distinct_key_value",
        "ok": distinct == expected == len(records),
        "expected": expected,
        "delivered": len(records),
        "distinct": distinct,
        "duplicates": len(records) - distinct,
        "missing": expected - distinct,
    }


def latency_case(
    kind: str,
    bootstrap: str,
    broker_pid: int,
    workdir: Path,
    *,
    hz: float,
    instruments: int,
    partitions: int,
    measure_s: float,
    pipelined: bool,
) -> dict[str, Any]:
    """Source -> subscriber latency of a fresh path fed at ``instruments`` x ``hz``."""
    total = instruments * hz
    with ProcessGroup(workdir / "logs") as procs:
        run = start_path(
            kind, procs, bootstrap, workdir, partitions=partitions, pipelined=pipelined
        )
        sampler = ProcSampler({"broker": broker_pid} | {k: p.pid for k, p in run.workers.items()})
        counter = TopicCounter(bootstrap, [run.out], partitions)
        try:
            feed = start_feed(
                run.cluster, instruments=instruments, rate_hz=hz, duration_s=measure_s + 20
            )
            sampler.add("feed", feed.pid)
            hop_topic = f"{run.out}-hop"
            _create_topics(bootstrap, [hop_topic], partitions)
            run.topics.append(hop_topic)
            hop_out = workdir / f"hop-{kind}.json"
            hop_reader = procs.spawn(
                f"hop-consume-{kind}",
                [sys.executable, "-m", HOP_PROBE, "consume", bootstrap, hop_topic,
                 str(partitions), str(measure_s + 15), str(hop_out), "0"],
            )  # fmt: skip
            time.sleep(WARM_S)
            load_before = load()
            probe_out = workdir / f"latency-{kind}.json"
            probe = procs.spawn(
                f"probe-{kind}",
                [sys.executable, "-m", PROBE, bootstrap, run.out, str(partitions),
                 str(measure_s), str(probe_out)],
            )  # fmt: skip
            # One hop in the same window: the latency probe skips its first second, and so
            # does this producer's start.
            time.sleep(1.0)
            hop_writer = procs.spawn(
                f"hop-produce-{kind}",
                [sys.executable, "-m", HOP_PROBE, "produce", bootstrap, hop_topic,
                 str(HOP_RATE_PER_S), str(measure_s)],
            )  # fmt: skip
            assert probe.wait(measure_s + 60) == 0, probe.log_tail()
            assert hop_writer.wait(60) == 0, hop_writer.log_tail()
            assert hop_reader.wait(60) == 0, hop_reader.log_tail()
            load_after = load()
            sampler.sample()
            feed.terminate()
            feed.wait(60)
        finally:
            counter.close()
            sampler.close()
    lat = json.loads(probe_out.read_text())
    lo, hi = lat["window_monotonic"]
    out: dict[str, Any] = {
        "total_rate_per_s": total,
        "instruments": instruments,
        "hz": hz,
        "source_to_receive": {k: lat[k] for k in ("n", "p50_ms", "p99_ms", "max_ms") if k in lat},
        "probe": lat,
        "hop": json.loads(hop_out.read_text()),
        "delivered_per_s_in_window": round(
            (counter.count_at(run.out, hi) - counter.count_at(run.out, lo)) / (hi - lo)
        ),
        "load_average_1m_before": load_before,
        "load_average_1m_after": load_after,
        "foreign_processes_after": len(foreign_processes()),
        "cpu": cpu_figures(kind, sampler, counter, run.out, lo=lo, hi=hi),
        "memory": memory_figures(kind, sampler),
        "forwarders": forwarder_counts(run),
        "topics_deleted": drop_topics(bootstrap, run.topics),
    }
    print(f"    {kind} {total:.0f}/s: {out['source_to_receive']}; one hop {out['hop']}", flush=True)
    return out
