"""Running a NELI member whose led partitions are worked on by a partition worker.

Publishers (:mod:`pricing_ha.publishing.publisher`) and relays (:mod:`pricing_ha.dedupe.relay`)
are both a :class:`WorkerMember`: :func:`make_neli` builds their NELI member on the application's
topic and broker settings, and :func:`serve_member` runs either one until SIGTERM, with its
health endpoints, and shuts it down cleanly (stop leading, flush, leave the group).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from neli import Mode, Neli, NeliConfig, Variant
from pricing_ha.config import AppConfig
from pricing_ha.member.health import HealthRole, member_health
from pricing_ha.member.worker import PartitionWorker
from pricing_ha.telemetry import Telemetry

__all__ = ["WorkerMember", "make_neli", "serve_member"]

log = logging.getLogger("pricing_ha.member")

#: How long a member waits, at most, for its worker to be ready before it joins its group
#: (:meth:`PartitionWorker.join_held`); then it joins anyway and defers what it cannot take up.
_JOIN_WAIT_S = 30.0
_JOIN_POLL_S = 0.05


def make_neli(
    cfg: AppConfig,
    *,
    group_id: str,
    member_name: str,
    variant: Variant,
    mode: Mode,
    **options: int | bool | str,
) -> Neli:
    """A NELI member on the application's NELI topic and broker settings.

    Args:
        cfg: the application configuration (broker, NELI topic, partition count M).
        group_id: the member's consumer group.
        member_name: shown in heartbeats, status and traces.
        variant: full or fast NELI.
        mode: non-exclusive or exclusive.
        **options: ``session_timeout_ms``, ``threshold_ms``, ``pulse_interval_ms``, ... (any
            :class:`neli.NeliConfig` field).
    """
    return Neli(
        NeliConfig(
            bootstrap_servers=cfg.broker.bootstrap_servers,
            group_id=group_id,
            topic=cfg.topics.neli,
            variant=variant,
            mode=mode,
            expected_partitions=cfg.topics.partitions,
            member_name=member_name,
            kafka=cfg.broker.neli_kafka(),
            consumer=cfg.broker.neli_consumer(),
            start_timeout_ms=cfg.broker.connect_timeout_ms,
            **options,  # type: ignore[arg-type]
        )
    )


class WorkerMember:
    """A NELI member whose led partitions are worked on by a :class:`PartitionWorker`.

    Args:
        neli: the NELI member (not started).
        worker: the worker (not started).
        telemetry: if given, the member's leadership is traced and measured. Its observer is
            attached after the worker's barrier, so a loss span follows the worker's flush.
    """

    def __init__(
        self, neli: Neli, worker: PartitionWorker, telemetry: Telemetry | None = None
    ) -> None:
        """Tie ``worker`` to ``neli``'s leadership through the barrier."""
        self.neli = neli
        self.worker = worker
        self._worker_failed: asyncio.Event | None = None
        self._neli_done: asyncio.Task[None] | None = None
        self._started = False
        self._closing = False
        neli.add_barrier(worker.barrier_handler)
        if telemetry is not None:
            telemetry.observe_neli(neli)

    def readiness(self) -> bool:
        """A ``/readyz`` check: NELI has joined its group and nothing has failed.

        Joined means :meth:`neli.Neli.start` has returned: the NELI topic was checked, the
        member subscribed to its group and heartbeats. Output that cannot be delivered (the
        worker's :meth:`~PartitionWorker.output_problem`) also makes the member not ready.

        Raises:
            RuntimeError: naming what is not ready (the check's detail).
        """
        if self._closing:
            raise RuntimeError("shutting down")
        if not self._started:
            held = self.worker.join_held()
            raise RuntimeError(
                "NELI has not joined its group yet" + ("" if held is None else f": {held}")
            )
        if self.worker.error is not None:
            raise RuntimeError(f"the partition worker failed: {self.worker.error!r}")
        if (problem := self.worker.output_problem()) is not None:
            raise RuntimeError(f"output cannot be delivered: {problem}")
        if (problem := self.worker.standby_problem()) is not None:
            raise RuntimeError(problem)
        if deferred := dict(self.worker.deferred):
            raise RuntimeError(f"takeovers waiting: {deferred}")
        done = self._neli_done
        if done is not None and done.done():
            raise RuntimeError("NELI stopped")
        return True

    async def start(self) -> None:
        """Start the worker, wait until it is ready to join (at most ``_JOIN_WAIT_S``), then
        join the NELI group."""
        loop = asyncio.get_running_loop()
        failed = self._worker_failed = asyncio.Event()
        self.worker.on_failure = lambda: loop.call_soon_threadsafe(failed.set)
        self.worker.start()
        try:
            await self._wait_until_joinable(failed)
            await self.neli.start()
        except BaseException:
            await asyncio.to_thread(self.worker.stop)
            raise
        self._started = True

    async def _wait_until_joinable(self, failed: asyncio.Event) -> None:
        """Wait (at most ``_JOIN_WAIT_S``) until the worker no longer holds the join back."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _JOIN_WAIT_S
        why = self.worker.join_held()
        if why is not None:
            log.info("joining the group once ready: %s", why)
        while why is not None and not failed.is_set():
            if loop.time() >= deadline:
                log.warning(
                    "joining the group after %.0f s, still not ready: %s", _JOIN_WAIT_S, why
                )
                return
            await asyncio.sleep(_JOIN_POLL_S)
            why = self.worker.join_held()

    async def run_until(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set; raise the error of NELI or the worker if one fails."""
        assert self._worker_failed is not None, "start() first"
        self._neli_done = asyncio.create_task(self.neli.wait())
        tasks = [
            self._neli_done,
            asyncio.create_task(stop.wait()),
            asyncio.create_task(self._worker_failed.wait()),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        neli_done = tasks[0]
        if neli_done.done() and not neli_done.cancelled() and neli_done.exception() is not None:
            raise neli_done.exception()  # type: ignore[misc]
        if self.worker.error is not None:
            raise self.worker.error

    async def close(self) -> None:
        """Stop leading (the barrier flushes in-flight work), leave the group, stop the worker."""
        self._closing = True
        try:
            await self.neli.close()
        finally:
            await asyncio.to_thread(self.worker.stop)


async def serve_member(
    member: WorkerMember,
    cfg: AppConfig,
    *,
    role: HealthRole,
    what: str,
    stop: asyncio.Event | None = None,
    telemetry: Telemetry | None = None,
    health_file: Path | None = None,
) -> None:
    """Run ``member`` until SIGTERM/SIGINT (or ``stop``), then shut it down cleanly.

    The one way a publisher or a relay member is served. With ``telemetry``, the member also
    serves ``/healthz``, ``/readyz`` and ``/metrics`` on ``[health] host`` and its role's port
    (the URL is logged, and written as JSON to ``health_file`` if given).

    Args:
        member: the member, not started.
        cfg: the application configuration.
        role: which health port to use (``"publisher"`` or ``"relay"``).
        what: how logs name the member.
        stop: set to stop (besides SIGTERM/SIGINT).
        telemetry: the process's telemetry; without it no health endpoints are served.
        health_file: where to write the health URL.
    """
    async with contextlib.AsyncExitStack() as stack:
        if telemetry is not None:
            await stack.enter_async_context(
                member_health(
                    cfg, role, telemetry, member_ready=member.readiness, health_file=health_file
                )
            )
        await _serve(member, what, stop)


async def _serve(member: WorkerMember, what: str, stop: asyncio.Event | None) -> None:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await member.start()
    log.info("%s started", what)
    try:
        await member.run_until(stop)
    finally:
        await member.close()
        log.info("%s stopped", what)
