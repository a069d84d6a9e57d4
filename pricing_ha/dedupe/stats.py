"""The counters of one relay member, shared by the parts of the relay that count into them.

The worker (:mod:`.relay_worker`) counts takeovers and how long each took; the output
(:mod:`.output`) prices relayed, dead letters, switches of publisher and records not produced
because the partition was no longer led; the producers (:mod:`.output_producers`) delivery
failures and replacements; the control records (:mod:`.control_writer`) checkpoints. The relay
logs them when it stops (:func:`pricing_ha.dedupe.relay.serve_relay`); tests read them. The
relay's metrics are separate (:mod:`pricing_ha.telemetry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RelayStats"]


@dataclass
class RelayStats:
    """Counters of one relay member."""

    relayed: int = 0
    dead_lettered: int = 0
    not_leader_skips: int = 0
    delivery_failures: int = 0
    takeovers: int = 0
    suspicions: int = 0  # takeovers begun on suspicion (the detector), wrong ones included
    rebuild_s: list[float] = field(default_factory=list)
    switches: int = 0
    producer_replacements: int = 0  # wedged output producers replaced (partitions started over)
    checkpoints: int = 0  # checkpoint records written to prices
    unconfirmed: int = 0  # raw prices out of bounds, not confirmed by the other group (DLQ)
    marks_reset: int = 0  # instruments' marks reset by an operator (pricing-ha reset-mark)
    instruments_refused: int = 0  # prices of new instruments dead-lettered: partition full
    checkpoints_skipped: int = 0  # checkpoints larger than the producers' message.max.bytes
