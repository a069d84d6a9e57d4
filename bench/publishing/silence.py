"""Per-instrument silence on the union of both groups' output while publishers or the broker fail.

Each run is a fresh :class:`~pricing_ha.local.cluster.PricingCluster` (fresh topics) on one
local Apache Kafka that this benchmark starts and owns: two publishing groups of two members each
(``p1/a``, ``p1/b``, ``p2/a``, ``p2/b``, separate OS processes) and the synthetic feed (20
instruments at 20 Hz each). Once all four members have been publishing for S seconds, one fault
is injected (``--scenarios``, default all three):

* ``crash`` (JSON key ``member``): SIGKILL of ``p1/a`` (its partitions wait for NELI to hand
  them to ``p1/b``);
* ``az`` (JSON key ``group``): SIGKILL of both ``p2`` members at once (a lost availability zone);
* ``pause`` (JSON keys ``pause_<P>s``, one per ``--pauses`` length P): SIGSTOP of the broker for
  P seconds, then SIGCONT (always, in a ``finally``). Publishers keep leading through the stall
  (``[neli] keep_leading_when_isolated``), so the union should go silent for no more than P.

The feed keeps going for ``--observe-s`` seconds (default 5·S) after the fault (after the SIGCONT
for a pause), then stops; once the union is complete both topics are read back and judged from
the data:

* silence: for each instrument, the longest time between the first publications (header
  ``publish_ns``, over both groups) of consecutive seqs, counting only seq pairs whose later
  publication falls after ``fault - 1 s``; the run's figure is the worst instrument;
* the feed's own gap over the same seq pairs (``source_time_ns`` on ``md.quotes``): the shuffled
  round order makes an instrument's interval vary between ~0 and ~2 ticks, so this, not the
  nominal tick, is what the union's silence should be compared with; ``excess`` is the worst
  (union gap - feed gap) over the same pairs;
* the same silence measured over a fault-free stretch before the fault (baseline);
* in ``member`` runs, the silence of ``p1``'s own stream (what the takeover costs a lone group);
* in pause runs, the resume delay: for each instrument, the time from SIGCONT to the first
  publication of a seq not published before it (worst instrument; also per group), and the
  worst silence minus the pause as measured (SIGSTOP to SIGCONT);
* missing: every (instrument, seq) the feed acknowledged must be on the union.

Every scenario is measured at each session timeout of ``--session-ms`` (default: the
PricingCluster default, 3000 ms); T is 2·S, as PricingCluster writes ``threshold_ms``.

Broker, feed, members and the benchmark share this machine's cores, so CPU contention shows up
as silence too: the 1-minute load average at each fault (``load_average_1m_at_kill``, also for
pauses) and the git commit are kept with the figures.

Run: ``.venv/bin/python -m bench.publishing [--runs 5] [--session-ms 3000,6000,10000]
[--scenarios crash,az,pause] [--pauses 1,3,6] [--observe-s SECONDS] [--out PATH]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Message

from bench.common.report import RESULTS, code_version, foreign_processes, write
from bench.publishing.silence_judging import (
    first_publications,
    gaps_between,
    judge_run,
    resume_figures,
    worst_per_instrument,
)
from bench.publishing.silence_report import figures, run_line, table
from pricing_ha.kafka.headers import header_dict
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import (
    SESSION_MS,  # PricingCluster's default S
    PricingCluster,
    by_group,
    missing,
)
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.tails import TopicTail
from pricing_ha.local.waiting import wait_for, wait_until

INSTRUMENTS = 20
RATE_HZ = 20.0
TICK_S = 1 / RATE_HZ
#: --scenarios name -> JSON key (the kill scenarios keep the keys of earlier results).
SCENARIOS = {"crash": "member", "az": "group", "pause": "pause"}
PAUSES_S = (1.0, 3.0, 6.0)
VICTIMS = {"member": ["p1-a"], "group": ["p2-a", "p2-b"]}


class Tail:
    """Follows ``prices.raw`` in a thread: when each (group, member) last published."""

    def __init__(self, cluster: PricingCluster) -> None:
        """Start following from the beginning of the topic."""
        self.last: dict[tuple[str, str], int] = {}
        self._tail = TopicTail(
            cluster.bootstrap, [cluster.topics["raw"]], cluster.partitions, self._keep
        )

    def _keep(self, batch: list[Message], _received: float) -> None:
        for msg in batch:
            h = header_dict(msg.headers())
            key = (h["group"], h["member"])
            self.last[key] = max(self.last.get(key, 0), int(h["publish_ns"]))

    def all_recent(self, members: list[tuple[str, str]], within_s: float = 1.0) -> bool:
        """Whether every one of ``members`` published within the last ``within_s``."""
        now = time.time_ns()
        return all(now - self.last.get(m, 0) < within_s * 1e9 for m in members)

    def close(self) -> None:
        """Stop following."""
        self._tail.close()


def _wait_settled(cluster: PricingCluster, tail: Tail, started: float) -> int:
    """Wait until all four members have been publishing for S seconds (and 2S since start)."""
    s = cluster.session_ms / 1000
    members = [(cluster.group(g), m) for g in ("p1", "p2") for m in ("a", "b")]
    since: list[int] = []

    def held() -> bool:
        if not tail.all_recent(members):
            return False
        since.append(time.time_ns())
        time.sleep(s)
        return tail.all_recent(members)

    if not wait_until(held, 90, poll_s=0.2):
        raise AssertionError(f"the members did not all publish within 90 s: {tail.last}")
    time.sleep(max(0.0, started + 2 * s - time.monotonic()))
    return since[-1]


def _pause_broker(broker: LocalKafka, pause_s: float) -> tuple[int, int]:
    """SIGSTOP the broker for ``pause_s``, then SIGCONT (always); return both times (ns)."""
    broker.check_alive()
    stop_ns = time.time_ns()
    try:
        broker.pause()
        time.sleep(pause_s)
    finally:
        broker.resume()
        cont_ns = time.time_ns()
    return stop_ns, cont_ns


def run_once(
    broker: LocalKafka,
    scenario: str,
    session_ms: int,
    observe_s: float,
    pause_s: float = 0.0,
) -> dict[str, Any]:
    """One fresh cluster, one fault (``member``, ``group`` or ``pause``); return its figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-silence-"))
    with ProcessGroup(workdir / "logs") as procs:
        c = PricingCluster(procs, broker.bootstrap, workdir, session_ms=session_ms)
        c.create_topics()
        tail = Tail(c)
        try:
            for g in ("p1", "p2"):
                for m in ("a", "b"):
                    c.publisher(g, m)
            started = time.monotonic()
            feed = c.feed(instruments=INSTRUMENTS, rate=RATE_HZ, duration=3600)
            settled_ns = _wait_settled(c, tail, started)
            load_at_fault = os.getloadavg()[0]
            if scenario == "pause":
                fault_ns, resume_ns = _pause_broker(broker, pause_s)
            else:
                fault_ns = resume_ns = time.time_ns()
                for v in VICTIMS[scenario]:
                    c.members[v].kill()
            time.sleep(observe_s)
            stop_ns = time.time_ns()
            feed.terminate()
            assert feed.wait(60) == 0, feed.log_tail()
        finally:
            tail.close()
        expected = c.expected()
        groups = ["p1", "p2"]

        def union_complete() -> bool:
            raw = c.read("raw", idle_s=0.5)
            have = set().union(*(by_group(raw, c.group(g)) for g in groups))
            return not missing(have, expected)

        try:
            wait_for(union_complete, 60, "the union to cover every seq")
            if scenario == "member":
                wait_for(
                    lambda: not missing(set(by_group(c.read("raw", 0.5), c.group("p1"))), expected),
                    60,
                    "p1 to cover every seq",
                )
        except AssertionError as exc:
            print(f"  {exc}", flush=True)
        raw = c.read("raw")
        quotes = c.read("quotes")
    out = judge_run(raw, quotes, expected, (settled_ns, fault_ns, stop_ns))
    if scenario == "member":
        lo, hi = fault_ns - 1e9, stop_ns + 5e9
        own = worst_per_instrument(gaps_between(first_publications(raw, c.group("p1")), lo, hi))
        out["p1_own_worst_silence_s"] = round(max(own.values()), 4) if own else None
        out["p1_missing"] = len(missing(set(by_group(raw, c.group("p1"))), expected))
    if scenario == "pause":
        pause = (resume_ns - fault_ns) / 1e9
        out["pause_s"] = round(pause, 4)
        out["worst_silence_minus_pause_s"] = round(out["worst_silence_s"] - pause, 4)
        out.update(resume_figures(raw, list(expected), resume_ns, {g: c.group(g) for g in groups}))
    out["load_average_1m_at_kill"] = round(load_at_fault, 2)
    out["workdir"] = str(workdir)
    return out


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _scenarios(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(SCENARIOS)}: got {text!r}")
    return names


def _plan(scenarios: list[str], pauses: list[float]) -> list[tuple[str, str, float]]:
    """(JSON key, scenario, pause length) of every fault of one run."""
    plan: list[tuple[str, str, float]] = []
    for name in scenarios:
        scenario = SCENARIOS[name]
        if scenario == "pause":
            plan += [(f"pause_{p:g}s", scenario, p) for p in pauses]
        else:
            plan.append((scenario, scenario, 0.0))
    return plan


def _measure_session(
    broker: LocalKafka,
    session_ms: int,
    plan: list[tuple[str, str, float]],
    runs: int,
    observe_s: float,
) -> dict[str, Any]:
    """Every fault of ``plan``, ``runs`` times (interleaved) at one S; their figures."""
    results: dict[str, list[dict[str, Any]]] = {key: [] for key, _, _ in plan}
    failed: list[dict[str, Any]] = []
    for i in range(runs):
        for key, scenario, pause_s in plan:
            try:
                r = run_once(broker, scenario, session_ms, observe_s, pause_s)
            except AssertionError as exc:  # a wait that timed out: keep the other runs
                broker.check_alive()
                print(f"run {i} {key} at S = {session_ms} ms FAILED: {exc}", flush=True)
                failed.append({"run": i, "scenario": key, "error": str(exc)[:2000]})
                continue
            r["run"] = i
            results[key].append(r)
            print(f"S = {session_ms} ms, {run_line(i, key, r)}", flush=True)
    out: dict[str, Any] = {
        "session_timeout_s": session_ms / 1000,
        "threshold_s": 2 * session_ms / 1000,
        "observe_after_fault_s": observe_s,
        "failed_runs": failed,
    }
    out.update({key: figures(key, rs) for key, rs in results.items() if rs})
    return out


def main() -> None:
    """Run every scenario ``--runs`` times at each S; write the JSON (``--out``) and a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--session-ms",
        type=lambda t: [int(x) for x in _floats(t)],
        default=[SESSION_MS],
        help=f"comma-separated S values, ms (T = 2·S); default {SESSION_MS}",
    )
    parser.add_argument(
        "--scenarios",
        type=_scenarios,
        default=list(SCENARIOS),
        help="comma-separated, of crash (JSON 'member'), az ('group'), pause; default all",
    )
    parser.add_argument(
        "--pauses",
        type=_floats,
        default=list(PAUSES_S),
        help="comma-separated broker pause lengths, s; default 1,3,6",
    )
    parser.add_argument(
        "--observe-s", type=float, default=None, help="after each fault; default 5·S"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "publish_silence.json")
    args = parser.parse_args()
    began = time.monotonic()
    plan = _plan(args.scenarios, args.pauses)
    figures: dict[str, Any] = {
        "runs": args.runs,
        "instruments": INSTRUMENTS,
        "rate_per_instrument_hz": RATE_HZ,
        "feed_tick_interval_s": TICK_S,
        "members_per_group": 2,
        "session_timeouts_ms": args.session_ms,
        "threshold": "T = 2·S (PricingCluster writes threshold_ms = 2 * session_timeout_ms)",
        "scenarios": [key for key, _, _ in plan],
        "observe_after_fault_s": args.observe_s if args.observe_s is not None else "5·S",
        "code": code_version(),
        "foreign_processes_at_start": foreign_processes(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }
    by_session: dict[str, dict[str, Any]] = {}
    with LocalKafka() as broker:
        for ms in args.session_ms:
            observe_s = args.observe_s if args.observe_s is not None else 5 * ms / 1000
            by_session[str(ms)] = _measure_session(broker, ms, plan, args.runs, observe_s)
    figures["by_session_ms"] = by_session
    figures["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    figures["total_runtime_s"] = round(time.monotonic() - began, 1)
    write("publish_silence", figures, args.out)
    print(table(by_session))


if __name__ == "__main__":
    main()
