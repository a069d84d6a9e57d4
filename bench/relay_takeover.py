"""Relay takeover: how long ``prices`` stays silent after SIGKILL of the active relay.

One pipeline (:func:`_pipeline.start_pipeline`) on the embedded broker: publishing groups
``p1`` and ``p2`` (``--members`` each, default 1: the machine has 2 cores), relays ``r1`` and
``r2``, and the synthetic feed (100 instruments x 10 Hz = 1000 quotes/s) running throughout.
A thread follows ``prices`` and keeps, per partition, every record's timestamp (set by the
relay's producer) and its ``relay`` header. Each round:

1. wait until settled: every partition led (NELI heartbeats) by exactly one live relay, every
   live relay leading something, and each partition's latest record, under 5 s old, written
   by that leader; held for 1.5 s;
2. the victim is the relay whose name is in the ``relay`` header of the latest records of the
   most partitions; its partitions are the affected ones; SIGKILL it;
3. once a survivor has written every affected partition: per affected partition, the silence is
   the longest gap between consecutive record timestamps from 1 s before the kill to 1 s after
   the first record written after it (in practice the gap spanning the kill); also kept: kill
   to first new record, and the survivor's rebuild time from its log;
4. start a replacement relay; the gaps while it joins and takes partitions over (a cooperative
   handover, no crash) are kept as ``join_handover_silence_s``.

The same cluster is used for every round, so ``prices`` grows and each takeover's rebuild
(reading ``prices[k]`` to its end) reads more; the partition sizes at each kill are kept. At the
end the feed stops and ``prices`` is judged exactly-once (:func:`pricing_ha.local.verdict.judge`).

Run: ``.venv/bin/python bench/relay_takeover.py [--rounds 5] [--members 1]``
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Message

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import TopicTail, summary, wait_until, write
from _pipeline import code_version, exactly_once, foreign_processes, start_feed, start_pipeline

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.relay import relay_group_id
from pricing_ha.kafka.headers import header_dict
from pricing_ha.local.broker import EmbeddedBroker
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.demo_view import LiveView
from pricing_ha.local.procs import ProcessGroup

INSTRUMENTS = 100
_TOOK = re.compile(r"relay took partition (\d+) \(.*ready in ([\d.]+) s\)")
_Rec = tuple[int, int, str]  # offset, timestamp ms, relay
FRESH_MS = 5000  # a partition's latest price must be this recent to count as flowing (under load)


class PricesTail:
    """Follows ``prices`` from the beginning: per partition, (offset, timestamp ms, relay)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        """Start following."""
        self.records: dict[int, list[_Rec]] = {p: [] for p in range(partitions)}
        self._tail = TopicTail(bootstrap, [topic], partitions, self._keep)

    def _keep(self, batch: list[Message], _received: float) -> None:
        for msg in batch:
            relay = header_dict(msg.headers()).get("relay", "")
            p, offset = msg.partition() or 0, msg.offset() or 0
            self.records[p].append((offset, msg.timestamp()[1], relay))

    def latest(self) -> dict[int, _Rec]:
        """The latest record of each partition that has one."""
        return {p: rs[-1] for p, rs in self.records.items() if rs}

    def close(self) -> None:
        """Stop following."""
        self._tail.close()


def _max_gap_ms(recs: list[_Rec], lo_ms: float, hi_ms: float) -> int:
    """Longest gap between consecutive records whose later one falls in [lo_ms, hi_ms]."""
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(recs) if lo_ms <= b[1] <= hi_ms]
    return max(gaps, default=0)


def _rebuilds(log: Path, start: int, partitions: list[int]) -> dict[int, float]:
    """Rebuild times a relay logged (after byte ``start`` of its log) for ``partitions``."""
    text = log.read_bytes()[start:].decode(errors="replace")
    out = {}
    for m in _TOOK.finditer(text):
        if int(m.group(1)) in partitions:
            out[int(m.group(1))] = float(m.group(2))
    return out


class Rounds:
    """The relays of one cluster, the live view of its leadership and the tail of prices."""

    def __init__(self, cluster: PricingCluster) -> None:
        """Follow the cluster's NELI topic and prices (relays r1 and r2 are running)."""
        self.c = cluster
        self.group_id = relay_group_id(cluster.group("relay"))
        self.view = LiveView(
            cluster.bootstrap, cluster.topics["neli"], cluster.topics["prices"], cluster.partitions
        )
        self.tail = PricesTail(cluster.bootstrap, cluster.topics["prices"], cluster.partitions)
        self.live = {"r1", "r2"}
        self.started = 2
        self.diagnostic = ""

    def close(self) -> None:
        """Stop following."""
        self.view.close()
        self.tail.close()

    def _settled(self, balanced: bool) -> bool:
        leaders = self.view.leaders(self.group_id)
        latest = self.tail.latest()
        now_ms = time.time() * 1000
        owners = set()
        for p, members in leaders.items():
            if len(members) != 1 or members[0] not in self.live or p not in latest:
                return False
            _, ts, relay = latest[p]
            if now_ms - ts > FRESH_MS or relay != members[0]:
                return False
            owners.add(members[0])
        return owners == self.live or not balanced

    def settle(self) -> str | None:
        """Wait to settle (balanced within 30 s, else any owner); return how, None if never."""
        for balanced, timeout in ((True, 30.0), (False, 15.0)):
            if wait_until(lambda b=balanced: self._settled(b), timeout):
                time.sleep(1.5)
                if self._settled(balanced):
                    return "balanced" if balanced else "unbalanced"
        now_ms = time.time() * 1000
        latest = {
            p: (round((now_ms - ts) / 1000, 1), r) for p, (_, ts, r) in self.tail.latest().items()
        }
        self.diagnostic = (
            f"not settled: leaders {self.view.leaders(self.group_id)}, live {sorted(self.live)}, "
            f"latest record per partition (age s, relay) {latest}"
        )
        print(f"  {self.diagnostic}", flush=True)
        return None

    def kill_active(self) -> dict[str, Any] | None:
        """SIGKILL the active relay; measure its partitions' silence (None: no takeover)."""
        c, tail = self.c, self.tail
        latest = tail.latest()
        by_relay: dict[str, list[int]] = {}
        for p, (_, _, relay) in sorted(latest.items()):
            by_relay.setdefault(relay, []).append(p)
        newest = max(latest.values(), key=lambda r: r[1])[2]
        victim = max(by_relay, key=lambda r: (len(by_relay[r]), r == newest))
        affected = by_relay[victim]
        row: dict[str, Any] = {
            "victim": victim,
            "affected_partitions": affected,
            "records_on_partition_at_kill": {p: len(tail.records[p]) for p in affected},
            "load_average_1m_at_kill": round(os.getloadavg()[0], 2),
            "foreign_processes_at_kill": len(foreign_processes()),
        }
        survivors = self.live - {victim}
        marks = {r: c.members[f"relay-{r}"].log_path.stat().st_size for r in survivors}
        kill_ms = time.time_ns() / 1e6
        c.members[f"relay-{victim}"].kill()
        self.live.discard(victim)

        def taken() -> bool:
            return all(
                any(r[2] != victim and r[1] > kill_ms for r in tail.records[p]) for p in affected
            )

        if not wait_until(taken, 90):
            return None
        time.sleep(1.0)
        silence, first_s, owner = {}, {}, {}
        for p in affected:
            recs = list(tail.records[p])
            first = min((r for r in recs if r[2] != victim and r[1] > kill_ms), key=lambda r: r[1])
            silence[p] = _max_gap_ms(recs, kill_ms - 1000, first[1] + 1000) / 1000
            first_s[p] = round((first[1] - kill_ms) / 1000, 3)
            owner[p] = first[2]
        row.update(silence_s=silence, kill_to_first_record_s=first_s, new_owner=owner)
        row["rebuild_s"] = {
            p: s
            for r in survivors
            for p, s in _rebuilds(c.members[f"relay-{r}"].log_path, marks[r], affected).items()
        }
        return row

    def replace(self, row: dict[str, Any]) -> str | None:
        """Start a replacement relay and wait to settle; note the handover gaps in ``row``."""
        self.started += 1
        name = f"r{self.started}"
        join_ms = time.time_ns() / 1e6
        self.c.relay(name)
        self.live.add(name)
        how = self.settle()
        settled_ms = time.time_ns() / 1e6
        row["replacement"] = name
        row["join_handover_silence_s"] = {
            p: _max_gap_ms(list(self.tail.records[p]), join_ms, settled_ms) / 1000
            for p in range(self.c.partitions)
        }
        row["join_settled_after_s"] = round((settled_ms - join_ms) / 1000, 2)
        row["settled_as"] = how
        return how


def _figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def summ(values: list[float]) -> dict[str, float]:
        return summary(values) if values else {"n": 0}

    return {
        "rounds_completed": len(rows),
        "silence_per_partition_s": summ([s for r in rows for s in r["silence_s"].values()]),
        "silence_worst_partition_per_round_s": summ([max(r["silence_s"].values()) for r in rows]),
        "kill_to_first_record_s": summ(
            [s for r in rows for s in r["kill_to_first_record_s"].values()]
        ),
        "survivor_rebuild_s": summ([s for r in rows for s in r["rebuild_s"].values()]),
        "join_handover_silence_worst_partition_s": summ(
            [max(r["join_handover_silence_s"].values()) for r in rows]
        ),
    }


def run(bootstrap: str, rounds: int, members: int, hz: float) -> dict[str, Any]:
    """The rounds on one cluster; returns the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-relay-takeover-"))
    rows: list[dict[str, Any]] = []
    with ProcessGroup(workdir / "logs") as procs:
        c = start_pipeline(procs, bootstrap, workdir, members)
        state = Rounds(c)
        feed = start_feed(c, instruments=INSTRUMENTS, rate_hz=hz, duration_s=3600)
        try:
            how = state.settle()
            for i in range(rounds):
                if how is None:
                    print(f"  round {i}: the relays did not settle; stopping", flush=True)
                    break
                row = state.kill_active()
                if row is None:
                    print(f"  round {i}: not taken over within 90 s; stopping", flush=True)
                    break
                how = state.replace(row)
                print(f"  round {i}: {row}", flush=True)
                rows.append(row)
        finally:
            feed.terminate()
            feed.wait(60)
            state.close()
        verdict = exactly_once(c, wait_s=60)  # time for the relays to catch up
    print(f"  exactly-once: {verdict}", flush=True)
    return {
        **_figures(rows),
        "exactly_once": verdict,
        "stopped_because": state.diagnostic or None,
        "rounds": rows,
    }


def main() -> None:
    """Run the rounds; write bench/results/relay_takeover.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--members", type=int, default=1, help="publishers per group")
    parser.add_argument("--hz", type=float, default=10.0, help="per instrument (100 instruments)")
    args = parser.parse_args()
    # SIGTERM unwinds (stopping every process started) instead of killing this process alone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    relay = AppConfig().relay
    began = time.monotonic()
    figures: dict[str, Any] = {
        "setup": {
            "broker": "embedded Tansu (memory storage), one process",
            "publishers_per_group": args.members,
            "groups": ["p1", "p2"],
            "relays": "2 live (a replacement started after each kill)",
            "partitions": 4,
            "feed": f"{INSTRUMENTS} instruments x {args.hz:g} Hz",
            "neli_session_ms": PricingCluster.__dataclass_fields__["session_ms"].default,
            "relay_session_ms": relay.session_timeout_ms,
            "relay_threshold_ms": relay.threshold_ms,
            "relay_clock_skew_ms": relay.clock_skew_ms,
            "relay_pulse_interval_ms": relay.pulse_interval_ms,
            "note": "all processes share the machine's cores",
            "code": code_version(),
            "foreign_processes_at_start": foreign_processes(),
        }
    }
    # Child processes write relative paths (e.g. telemetry traces) here, not in the repository.
    os.chdir(tempfile.mkdtemp(prefix="bench-relay-takeover-cwd-"))
    with EmbeddedBroker() as broker:
        figures.update(run(broker.bootstrap, args.rounds, args.members, args.hz))
    figures["wall_time_s"] = round(time.monotonic() - began, 1)
    write("relay_takeover", figures)


if __name__ == "__main__":
    main()
