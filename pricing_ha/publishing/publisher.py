"""Where prices are published: one member of a publishing group (``pricing-ha run --group p1``).

The member runs full NELI in non-exclusive mode on the shared NELI topic, in its group's own
consumer group (``pricing.<group>``). For every NELI partition k it leads, its quote worker
(:mod:`.quote_worker`) consumes ``md.quotes[k]``, prices each quote (a pure function,
:mod:`.pricing`) and produces the canonical bytes to ``prices.raw[k]``; invalid quotes go to
the dead-letter topic with the reason. Quote positions are committed to the group's quote
consumer group (``pricing.<group>.quotes``) only after everything produced for them, and for
every quote before them, is acknowledged, so the next leader of k resumes exactly there and
never skips a quote (it may re-send a few, which are duplicates the relay drops).

Leadership is checked with :meth:`neli.Neli.leads` once per partition per batch, before its
first quote is produced, and again after any wait for room in the producer's queue
(:meth:`.quote_worker.QuoteWorker._leads_now`), never from a flag kept across batches. All
Kafka work on quotes happens in the worker's thread; the NELI
barrier makes a revocation wait until that thread has flushed the partition's output and
committed what it acknowledged.

This module wires the member together (:class:`Publisher`: NELI and the worker) and serves it
(:func:`serve_publisher`). Telemetry: leadership spans and metrics come from
:meth:`~pricing_ha.telemetry.Telemetry.observe_neli`; the quote and price spans and the price
metrics are the worker's (:mod:`.quote_worker`), as are the member's counters
(:class:`~.quote_worker.PublisherStats`) and its ready check (a wedged price producer).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from neli import Mode, Variant
from pricing_ha.config import AppConfig
from pricing_ha.member.runner import WorkerMember, make_neli, serve_member
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker, quotes_group_id
from pricing_ha.telemetry import Telemetry

__all__ = [
    "Publisher",
    "PublisherStats",
    "QuoteWorker",
    "neli_group_id",
    "quotes_group_id",
    "serve_publisher",
]

log = logging.getLogger("pricing_ha.publisher")


def neli_group_id(group: str) -> str:
    """The NELI consumer group of publishing group ``group``."""
    return f"pricing.{group}"


class Publisher(WorkerMember):
    """One member of publishing group ``group``.

    Args:
        cfg: the application configuration.
        group: the publishing group, e.g. ``"p1"``.
        member: this member's name (unique within the group).
        telemetry: where spans and metrics go (default: nowhere). Its leadership tracing is
            attached here, before NELI starts.
    """

    def __init__(
        self, cfg: AppConfig, group: str, member: str, telemetry: Telemetry | None = None
    ) -> None:
        """Prepare the member; nothing connects until :meth:`start`."""
        self.cfg = cfg
        self.group = group
        self.member = member
        self.stats = PublisherStats()
        n = cfg.neli
        neli = make_neli(
            cfg,
            group_id=neli_group_id(group),
            member_name=f"{group}/{member}",
            variant=Variant.FULL,
            mode=Mode.NON_EXCLUSIVE,
            session_timeout_ms=n.session_timeout_ms,
            threshold_ms=n.threshold_ms,
            pulse_interval_ms=n.pulse_interval_ms,
            keep_leading_when_isolated=n.keep_leading_when_isolated,
        )
        tel = telemetry if telemetry is not None else Telemetry.noop(cfg.telemetry.az)
        worker = QuoteWorker(cfg, group, member, neli.leads, self.stats, telemetry=tel)
        super().__init__(neli, worker, telemetry)


async def serve_publisher(
    cfg: AppConfig,
    group: str,
    member: str,
    stop: asyncio.Event | None = None,
    *,
    telemetry: Telemetry | None = None,
    health_file: Path | None = None,
) -> None:
    """Run one publisher member until SIGTERM/SIGINT (or ``stop``), then shut down cleanly.

    With ``telemetry``, the member is traced and measured, and serves ``/healthz``, ``/readyz``
    and ``/metrics`` on ``[health] host`` and ``publisher_port`` (its URL is logged, and
    written as JSON to ``health_file`` if given).
    """
    publisher = Publisher(cfg, group, member, telemetry)
    try:
        await serve_member(
            publisher,
            cfg,
            role="publisher",
            what=f"publisher {group}/{member} ({neli_group_id(group)})",
            stop=stop,
            telemetry=telemetry,
            health_file=health_file,
        )
    finally:
        log.info("publisher %s/%s: %s", group, member, publisher.stats)
