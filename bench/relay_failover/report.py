"""The figures of one retained value of the relay takeover benchmark, from its clusters' runs.

:func:`summarise` turns the clusters' events into distributions: silences per fault (per
affected partition, and the worst partition per event), the relay's input's own silences and
how far each silence went beyond it, hand-over gaps, planned moves in feed ticks, the SIGSTOP's
zombie records, the quiet windows' takeovers, the baseline and the exactly-once verdicts.
"""

from __future__ import annotations

from typing import Any

from bench.common.topic_gaps import BASELINE_SUB_S
from bench.relay_failover.cluster import ClusterRun
from bench.relay_failover.goals import worst_per_event
from bench.relay_failover.rounds import FAULTS, pct

_COUNTS = ("expected", "delivered", "duplicates", "missing", "out_of_order")
_TOPIC_COUNTS = ("duplicates", "out_of_order", "gaps")
_KINDS = ("kill", "sigstop", "sigterm", "join")


def summarise(
    runs: list[ClusterRun], *, tick_s: float, faults: tuple[str, ...] = FAULTS
) -> dict[str, Any]:
    """The figures of the clusters ``runs`` (one retained value); ``tick_s``: the feed's tick;
    ``faults``: those of one round."""
    rows = [e for r in runs for e in r.events]
    verdicts = [r.verdict for r in runs]
    judged = [v for v in verdicts if v is not None]

    def of(fault: str, worst: bool, key: str = "silence_s") -> dict[str, float]:
        if worst:
            return pct(worst_per_event(rows, fault, key))
        return pct([v for r in rows if r["fault"] == fault and r.get(key) for v in r[key].values()])

    def beyond(fault: str, key: str, reference: str) -> dict[str, float]:
        """Per event: the most any partition's silence exceeded its input's own gap."""
        worst = [
            max(r[key][p] - r[reference].get(p, 0.0) for p in r[key])
            for r in rows
            if r["fault"] == fault and r.get(key) and r.get(reference) is not None
        ]
        return pct([round(w, 4) for w in worst])

    def ticks(fault: str, key: str = "silence_s") -> dict[str, float]:
        """The worst partition per event, in feed ticks."""
        return pct([round(s / tick_s, 2) for s in worst_per_event(rows, fault, key)])

    faults_per_round: dict[tuple[int, int], int] = {}
    for r in rows:
        faults_per_round[r["cluster"], r["round"]] = (
            faults_per_round.get((r["cluster"], r["round"]), 0) + 1
        )
    loaded = [r.summary["preload"] for r in runs]
    stops = [r for r in rows if r["fault"] == "sigstop"]
    quiet = [r.quiet for r in runs if r.quiet is not None]
    gaps = [g for r in runs for g in r.baseline_gaps_s]
    return {
        "preload": {
            "records": max((p.get("records", 0) for p in loaded), default=0),
            "into": "each cluster's prices",
            "seconds": max((p.get("seconds", 0.0) for p in loaded), default=0.0),
            "not_acknowledged": sum(p.get("not_acknowledged", 0) for p in loaded),
        },
        "clusters": len(runs),
        # rounds whose faults were all made (in any cluster)
        "rounds_completed": sum(1 for n in faults_per_round.values() if n == len(faults)),
        "silence_s": {
            fault: {"per_affected_partition": of(fault, False), "worst_per_event": of(fault, True)}
            for fault in _KINDS
        },
        # Planned moves against the feed's tick: the worst partition per event, in ticks.
        "silence_ticks": {
            "tick_s": tick_s,
            "sigterm": ticks("sigterm"),
            "join": ticks("join"),
            "join_from_rebalance": ticks("join", "silence_from_rebalance_s"),
        },
        # SIGSTOP for --stop-s, then SIGCONT: the silence until the cluster settled again
        # (the stopped relay's return included), who ended it, and the stopped relay's
        # records visible after its successor's first (read_committed, at the cluster's end)
        "sigstop": {
            "until_settled_worst_per_event_s": of("sigstop", True, "silence_until_settled_s"),
            "stopped_s": pct([r["stopped_s"] for r in stops]),
            "ended_by": sorted(
                {
                    "stopped relay (resumed)" if who == r["victim"] else "another relay"
                    for r in stops
                    for who in r["successor"].values()
                }
            ),
            "zombie_records": sum(r["zombie_records"] for r in stops),
        },
        # The relay's input (both groups' copies on prices.raw, as one) in the same windows:
        # its own longest gap per event, and how far each silence on prices went beyond its
        # input's gap on the same partition (worst partition per event). What the relay adds.
        "input_silence_s": {
            **{fault: of(fault, True, "input_silence_s") for fault in _KINDS},
            "join_from_rebalance": of("join", True, "input_silence_from_rebalance_s"),
        },
        "beyond_input_s": {
            **{fault: beyond(fault, "silence_s", "input_silence_s") for fault in _KINDS},
            "join_from_rebalance": beyond(
                "join", "silence_from_rebalance_s", "input_silence_from_rebalance_s"
            ),
        },
        # a join's silence from the rebalance it causes (the first probe of a new owner)
        # until settled: the move without the new process's start-up on the same 2 cores
        "join_from_rebalance_silence_s": {
            "per_partition": of("join", False, "silence_from_rebalance_s"),
            "worst_per_event": of("join", True, "silence_from_rebalance_s"),
            "rebalance_after_start_s": pct(
                [r["rebalance_after_s"] for r in rows if r.get("rebalance_after_s") is not None]
            ),
        },
        # per moved partition: the gap at the change of relay (the move's own cost)
        "handover_gap_s": {
            fault: pct(
                [g for r in rows if r["fault"] == fault for g in r["handover_gap_s"].values()]
            )
            for fault in _KINDS
        },
        "to_first_record_of_successor_s": {
            fault: pct(
                [
                    s
                    for r in rows
                    if r["fault"] == fault
                    for s in r["to_first_record_of_successor_s"].values()
                ]
            )
            for fault in ("kill", "sigstop")
        },
        # fault-free windows of --quiet-s: takeovers counted on prices (wrong suspicions)
        "quiet": quiet or None,
        # per partition and 3 s sub-window of each cluster's fault-free window: the longest gap
        "baseline_worst_gap_s": pct(gaps),
        # the same run's one-hop reference: relay's produce() -> a reader of prices, in the
        # fault-free windows
        "hop_s": pct([h / 1000 for r in runs for h in r.hops_ms]),
        "baseline_window_s": {
            "sub_window": BASELINE_SUB_S,
            "per_cluster": [r.summary.get("baseline_window_s") for r in runs],
        },
        # over all clusters: ok only if every cluster was judged and exactly once (against the
        # feed, and counted from the topic alone)
        "exactly_once": {
            "ok": len(judged) == len(verdicts) and all(v["ok"] for v in judged),
            **{k: sum(v[k] for v in judged) for k in _COUNTS},
            "counted_from_the_topic": {
                k: sum(v["topic"][k] for v in judged) for k in _TOPIC_COUNTS
            },
        },
        "exactly_once_per_cluster": verdicts,
        "stopped_because": {str(r.summary["cluster"]): r.diagnostic for r in runs if r.diagnostic}
        or None,
        "per_cluster": [r.summary for r in runs],
        "events": rows,
    }
