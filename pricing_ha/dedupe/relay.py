"""Where dedupe happens: the relay (``pricing-ha dedupe``) writes ``prices`` from ``prices.raw``.

Ownership of a partition is **exclusive** (at most one relay emits for it at any instant): the
relay runs the fast NELI variant in exclusive mode on the NELI topic, in group ``pricing.relay``.
That gives own-heartbeat fencing, a grace period T after every new assignment, and the stall
guard that stops a relay which was paused (SIGSTOP) from emitting when it wakes up. Leadership is
checked for every record at the moment it is produced. Exclusivity itself is the broker's: each
owned partition is written by a transactional producer of its own, and a successor's
``init_transactions`` fences the previous owner, whose later writes the broker refuses
(:mod:`pricing_ha.dedupe.fences`), whatever its clock or state.

Every relay member tails every partition of ``prices`` (:mod:`pricing_ha.dedupe.standby`),
so taking partition k over costs a takeover marker and the short read up to it: the high-water
marks just before the marker mean no seq is emitted twice across a fail-over. It then consumes
``prices.raw[k]`` from its group's committed position, arbitrates (:mod:`.arbitration`) and
commits the input position only once the output is acknowledged and nothing before it is still
held in the reorder window. Malformed raw records go to the raw dead-letter topic.

A planned revocation is a hand-over (:mod:`pricing_ha.dedupe.handover`): the old owner emits
until its successor's probe appears, then releases; the successor ends its grace period on the
release (:mod:`pricing_ha.dedupe.grace_period`) and takes over
(:mod:`pricing_ha.dedupe.succession`). Control records and what they prove:
:mod:`pricing_ha.dedupe.control`; writing them: :mod:`pricing_ha.dedupe.control_writer`.

The worker (takeover, letting go, starting over) is :mod:`pricing_ha.dedupe.relay_worker`, its
clients and group ids :mod:`pricing_ha.dedupe.relay_clients`, and its hot path (arbitration,
output, commits) :mod:`pricing_ha.dedupe.hot_path`; the records read are in
:mod:`pricing_ha.dedupe.records`; producing prices, with the relay's telemetry
(``process``/``send`` spans of sampled prices, a ``relay.switch`` span per switch of
publisher, metrics), in :mod:`pricing_ha.dedupe.output`, through the producers of
:mod:`pricing_ha.dedupe.output_producers` (fencing, a wedged producer replaced). The member's
counters are :mod:`pricing_ha.dedupe.stats`.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from neli import Mode, Variant
from pricing_ha.config import AppConfig
from pricing_ha.dedupe.liveness import Liveness, LivenessReader
from pricing_ha.dedupe.records import RawPrice, parse_raw
from pricing_ha.dedupe.relay_clients import RelayClients, raw_group_id, relay_group_id
from pricing_ha.dedupe.relay_worker import RelayWorker
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.member.runner import WorkerMember, make_neli, serve_member
from pricing_ha.telemetry import Telemetry

__all__ = [
    "DEFAULT_GROUP",
    "RawPrice",
    "Relay",
    "RelayClients",
    "RelayStats",
    "RelayWorker",
    "parse_raw",
    "raw_group_id",
    "relay_group_id",
    "serve_relay",
]

log = logging.getLogger("pricing_ha.relay")

DEFAULT_GROUP = "relay"


class Relay(WorkerMember):
    """One relay member.

    Args:
        cfg: the application configuration.
        member: this member's name.
        group: the relay group (one per deployment; ``relay`` by default).
        telemetry: where spans and metrics go (default: nowhere). Its leadership tracing is
            attached here, before NELI starts.
    """

    def __init__(
        self,
        cfg: AppConfig,
        member: str,
        group: str = DEFAULT_GROUP,
        telemetry: Telemetry | None = None,
    ) -> None:
        """Prepare the member; nothing connects until :meth:`start`."""
        self.cfg = cfg
        self.member = member
        self.stats = RelayStats()
        r = cfg.relay
        neli = make_neli(
            cfg,
            group_id=relay_group_id(group),
            member_name=f"relay/{member}",
            variant=Variant.FAST,
            mode=Mode.EXCLUSIVE,
            session_timeout_ms=r.session_timeout_ms,
            threshold_ms=r.threshold_ms,
            clock_skew_ms=r.clock_skew_ms,
            pulse_interval_ms=r.pulse_interval_ms,
            assignment_strategy=r.assignment_strategy,
        )
        tel = telemetry if telemetry is not None else Telemetry.noop(cfg.telemetry.az)
        liveness = None
        if r.takeover_after_s:
            liveness = LivenessReader(
                cfg.broker.client_config(required={"client.id": f"relay-{member}-liveness"}),
                cfg.topics.neli,
                Liveness(relay_group_id(group), neli.member_id, r.takeover_after_s),
            )
        worker = RelayWorker(cfg, group, member, neli, self.stats, telemetry=tel, liveness=liveness)
        super().__init__(neli, worker, telemetry)


async def serve_relay(
    cfg: AppConfig,
    member: str,
    group: str = DEFAULT_GROUP,
    stop: asyncio.Event | None = None,
    *,
    telemetry: Telemetry | None = None,
    health_file: Path | None = None,
) -> None:
    """Run one relay member until SIGTERM/SIGINT (or ``stop``), then hand over cleanly.

    With ``telemetry``, the member is traced and measured, and serves ``/healthz``, ``/readyz``
    and ``/metrics`` on ``[health] host`` and ``relay_port`` (its URL is logged, and written
    as JSON to ``health_file`` if given).
    """
    relay = Relay(cfg, member, group, telemetry)
    try:
        await serve_member(
            relay,
            cfg,
            role="relay",
            what=f"relay {member} ({relay_group_id(group)})",
            stop=stop,
            telemetry=telemetry,
            health_file=health_file,
        )
    finally:
        log.info("relay %s: %s", member, relay.stats)
