"""``pricing-ha run`` (a publisher member) and ``pricing-ha dedupe`` (a relay member)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._options import (
    AzOption,
    HealthFileOption,
    JsonLogsOption,
    with_az,
    with_json_logs,
)
from pricing_ha.cli._support import (
    BootstrapOption,
    ConfigOption,
    VerboseOption,
    guarded,
    load_cli_config,
    quiet_connection_log,
)
from pricing_ha.errors import ConfigError

if TYPE_CHECKING:
    from pricing_ha.config import AppConfig
    from pricing_ha.telemetry import Telemetry


__all__ = ["checked_group", "dedupe_command", "run_command"]


@app.command("run")
def run_command(
    group: Annotated[
        str,
        typer.Option(
            "--group",
            help="Publishing group: one of [groups] publishing in the configuration "
            "(p1 or p2 by default).",
        ),
    ],
    member: Annotated[
        str | None, typer.Option(help="Member name within the group (default: host-pid).")
    ] = None,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    *,
    az: AzOption = None,
    health_file: HealthFileOption = None,
    verbose: VerboseOption = False,
    json_logs: JsonLogsOption = False,
) -> None:
    """Run one publisher member of GROUP: NELI non-exclusive, prices md.quotes to prices.raw.

    Serves /healthz, /readyz and /metrics on health.host and health.publisher_port.
    """
    from pricing_ha.publishing.publisher import serve_publisher

    _serve_member(
        "publisher",
        group,
        member,
        (config, bootstrap, az, verbose, json_logs),
        lambda cfg, group, name, tel: serve_publisher(
            cfg, group, name, telemetry=tel, health_file=health_file
        ),
    )


@app.command("dedupe")
def dedupe_command(
    member: Annotated[str | None, typer.Option(help="Member name (default: host-pid).")] = None,
    group: Annotated[
        str | None,
        typer.Option(
            help="Relay group: only [groups] relay of the configuration is accepted "
            "(default: that group, 'relay' unless configured).",
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    *,
    az: AzOption = None,
    health_file: HealthFileOption = None,
    verbose: VerboseOption = False,
    json_logs: JsonLogsOption = False,
) -> None:
    """Run one relay member: exclusive owner per partition, writes deduplicated `prices`.

    Serves /healthz, /readyz and /metrics on health.host and health.relay_port.
    """
    from pricing_ha.dedupe.relay import serve_relay

    _serve_member(
        "relay",
        group,
        member,
        (config, bootstrap, az, verbose, json_logs),
        lambda cfg, group, name, tel: serve_relay(
            cfg, name, group, telemetry=tel, health_file=health_file
        ),
    )


def checked_group(cfg: AppConfig, role: str, group: str | None) -> str:
    """The ``--group`` of a ``role`` member, if the configuration's ``[groups]`` has it.

    A publisher's group must be one of ``[groups] publishing``; a relay's must be
    ``[groups] relay``, which is also its default (``group`` None).

    Raises:
        ConfigError: the group is not configured for the role (exit status 2), naming the
            option, the value and the allowed values.
    """
    if role == "relay":
        allowed: tuple[str, ...] = (cfg.groups.relay,)
        key = "[groups] relay"
    else:
        allowed = cfg.groups.publishing
        key = "[groups] publishing"
    if group is None and role == "relay":
        return cfg.groups.relay
    if group in allowed:
        return group
    raise ConfigError(
        "command line",
        "--group",
        f"{group!r} is not a configured {role} group; allowed: {', '.join(allowed)} "
        f"(set by {key} in the configuration)",
    )


def _serve_member(
    role: str,
    group: str | None,
    member: str | None,
    sources: tuple[Path | None, str | None, str | None, bool, bool],
    serve: Callable[[AppConfig, str, str, Telemetry], Coroutine[Any, Any, None]],
) -> None:
    """Load and check the configuration and group, set up telemetry, run ``serve`` on uvloop."""
    import logging
    import os
    import socket

    from pricing_ha import aio
    from pricing_ha.kafka.topics import check_layout, make_admin
    from pricing_ha.telemetry import setup_telemetry

    config, bootstrap, az, verbose, json_logs = sources
    quiet_connection_log(
        verbose, level=logging.INFO, fmt="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    with guarded():
        cfg = with_json_logs(with_az(load_cli_config(config, bootstrap), az), json_logs)
        group = checked_group(cfg, role, group)
        check_layout(make_admin(cfg), cfg)
        name = member or f"{socket.gethostname()}-{os.getpid()}"
        telemetry = setup_telemetry(
            cfg, service_role=role, group=group, member=name, set_global=True
        )
        try:
            aio.run(serve(cfg, group, name, telemetry))
        finally:
            telemetry.shutdown()
