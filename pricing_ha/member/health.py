"""The health endpoints of a long-running pricing-ha process, with its readiness checks.

:func:`member_health` serves ``/healthz``, ``/readyz`` and ``/metrics`` for a NELI member
(``pricing-ha run``, ``pricing-ha dedupe``) on ``[health] host`` and the role's port, with these
readiness checks:

* ``broker``: the cluster answers a metadata request made through librdkafka with the
  configured security settings (TLS, SASL, MSK IAM), as the members' own clients connect;
* ``neli``: the member has joined its NELI group and neither NELI nor its worker has failed;
* ``topics``: every topic exists with ``topics.partitions`` partitions (a metadata request).

The bound URL is logged and, with a health file, written there as JSON (``{"url": ...}``), so
that tests, the demo and scripts can find a port picked at random (port 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

from pricing_ha.config import AppConfig
from pricing_ha.telemetry.health import AsyncCheck, Check, HealthServer, health_port
from pricing_ha.telemetry.sdk import Telemetry

__all__ = [
    "HealthRole",
    "broker_check",
    "health_in_thread",
    "member_health",
    "read_health_file",
    "topic_layout_check",
    "write_health_file",
]

log = logging.getLogger("pricing_ha.health")

#: The long-running roles with a health port of their own (``[health] <role>_port``).
HealthRole = Literal["publisher", "relay", "subscriber"]

_LAYOUT_TIMEOUT_S = 1.5  # below Readiness.check_timeout_s, so a dead broker reads as its error


def broker_check(cfg: AppConfig, timeout_s: float = _LAYOUT_TIMEOUT_S) -> AsyncCheck:
    """The readiness check of the configured cluster, through librdkafka.

    A metadata request from an admin client built like every other client of the process
    (:meth:`~pricing_ha.config.BrokerConfig.client_config`: TLS, SASL/SCRAM, MSK IAM tokens),
    so a broker that answers but refuses our credentials, or a TLS setting that cannot work,
    fails readiness as it would fail the members' own clients. The check raises with
    librdkafka's error ("no broker of ... answered"); a metadata answer listing no broker
    fails too. The admin client is
    built at the first check and reused.
    """
    from confluent_kafka import KafkaException

    from pricing_ha.kafka.topics import make_admin

    admin: Any = None

    async def broker() -> bool:
        nonlocal admin
        if admin is None:
            admin = make_admin(cfg)
        try:
            metadata = await asyncio.to_thread(admin.list_topics, timeout=timeout_s)
        except KafkaException as exc:
            raise ConnectionError(
                f"no broker of {cfg.broker.bootstrap_servers} answered a metadata request "
                f"within {timeout_s:g} s: {exc.args[0].str() if exc.args else exc}"
            ) from exc
        if not metadata.brokers:
            raise ConnectionError("the cluster's metadata lists no broker")
        return True

    return broker


def topic_layout_check(cfg: AppConfig, timeout_s: float = _LAYOUT_TIMEOUT_S) -> Check:
    """A check that passes when every topic has the configured layout (raises with why not)."""
    from pricing_ha.kafka.topics import check_layout, make_admin

    admin: Any = None

    async def layout() -> bool:
        nonlocal admin
        if admin is None:
            admin = make_admin(cfg)
        await asyncio.to_thread(check_layout, admin, cfg, timeout_s=timeout_s)
        return True

    return layout


def write_health_file(path: Path, url: str, **extra: object) -> None:
    """Write ``{"url": url, "pid": ..., **extra}`` to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"url": url, "pid": os.getpid(), **extra}) + "\n")
    tmp.replace(path)


def read_health_file(path: Path) -> str | None:
    """The URL in a health file, or ``None`` if it is not written (yet)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    url = doc.get("url") if isinstance(doc, dict) else None
    return url if isinstance(url, str) else None


@contextlib.asynccontextmanager
async def member_health(
    cfg: AppConfig,
    role: HealthRole,
    telemetry: Telemetry,
    *,
    member_ready: Check,
    health_file: Path | None = None,
) -> AsyncIterator[HealthServer]:
    """Serve the health endpoints of a NELI member while the block runs.

    Args:
        cfg: the configuration (``[health]``, the broker, the topics).
        role: selects the port (``[health] <role>_port``; 0 picks a free one).
        telemetry: ``/metrics`` renders its metrics.
        member_ready: the ``neli`` readiness check.
        health_file: where to write the bound URL as JSON.
    """
    server = HealthServer(
        cfg.health.host, health_port(cfg.health, role), metrics=telemetry.prometheus_text
    )
    server.add_check("broker", broker_check(cfg))
    server.add_check("neli", member_ready)
    server.add_check("topics", topic_layout_check(cfg))
    async with server:
        log.info("%s health: %s/healthz /readyz /metrics", role, server.url)
        if health_file is not None:
            write_health_file(health_file, server.url, role=role)
        yield server


@contextlib.contextmanager
def health_in_thread(server: HealthServer, start_timeout_s: float = 10.0) -> Iterator[HealthServer]:
    """Run ``server`` on its own event loop in a daemon thread (for synchronous commands).

    Raises:
        OSError: the server could not bind.
        TimeoutError: it did not start within ``start_timeout_s``.
    """
    import threading

    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)
            started.set()
            loop.close()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(server.close())
            loop.close()

    thread = threading.Thread(target=run, name="health", daemon=True)
    thread.start()
    if not started.wait(start_timeout_s):
        raise TimeoutError(f"the health server did not start within {start_timeout_s} s")
    if failure:
        raise failure[0]
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(start_timeout_s)
