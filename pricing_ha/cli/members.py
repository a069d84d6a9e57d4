"""``pricing-ha run`` (a publisher member) and ``pricing-ha dedupe`` (a relay member)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._options import AzOption, HealthFileOption, with_az
from pricing_ha.cli._support import BootstrapOption, ConfigOption, guarded, load_cli_config

if TYPE_CHECKING:
    from pricing_ha.config import AppConfig
    from pricing_ha.telemetry import Telemetry


__all__ = ["dedupe_command", "run_command"]


@app.command("run")
def run_command(
    group: Annotated[str, typer.Option("--group", help="Publishing group: p1 or p2.")],
    member: Annotated[
        str | None, typer.Option(help="Member name within the group (default: host-pid).")
    ] = None,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    *,
    az: AzOption = None,
    health_file: HealthFileOption = None,
) -> None:
    """Run one publisher member of GROUP: NELI non-exclusive, prices md.quotes to prices.raw.

    Serves /healthz, /readyz and /metrics on health.host and health.publisher_port.
    """
    from pricing_ha.publishing.publisher import serve_publisher

    _serve_member(
        "publisher",
        group,
        member,
        (config, bootstrap, az),
        lambda cfg, name, tel: serve_publisher(
            cfg, group, name, telemetry=tel, health_file=health_file
        ),
    )


@app.command("dedupe")
def dedupe_command(
    member: Annotated[str | None, typer.Option(help="Member name (default: host-pid).")] = None,
    group: Annotated[str, typer.Option(help="Relay group (one per deployment).")] = "relay",
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    *,
    az: AzOption = None,
    health_file: HealthFileOption = None,
) -> None:
    """Run one relay member: exclusive owner per partition, writes deduplicated `prices`.

    Serves /healthz, /readyz and /metrics on health.host and health.relay_port.
    """
    from pricing_ha.dedupe.relay import serve_relay

    _serve_member(
        "relay",
        group,
        member,
        (config, bootstrap, az),
        lambda cfg, name, tel: serve_relay(
            cfg, name, group, telemetry=tel, health_file=health_file
        ),
    )


def _serve_member(
    role: str,
    group: str,
    member: str | None,
    sources: tuple[Path | None, str | None, str | None],
    serve: Callable[[AppConfig, str, Telemetry], Coroutine[Any, Any, None]],
) -> None:
    """Load and check the configuration, set up telemetry, run ``serve`` on uvloop."""
    import logging
    import os
    import socket

    from pricing_ha import aio
    from pricing_ha.kafka.topics import check_layout, make_admin
    from pricing_ha.telemetry import setup_telemetry

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config, bootstrap, az = sources
    with guarded():
        cfg = with_az(load_cli_config(config, bootstrap), az)
        check_layout(make_admin(cfg), cfg)
        name = member or f"{socket.gethostname()}-{os.getpid()}"
        telemetry = setup_telemetry(
            cfg, service_role=role, group=group, member=name, set_global=True
        )
        try:
            aio.run(serve(cfg, name, telemetry))
        finally:
            telemetry.shutdown()
