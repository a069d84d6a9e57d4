"""``pricing-ha topics create|check``: the topic layout."""

from __future__ import annotations

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._support import (
    BootstrapOption,
    ConfigOption,
    VerboseOption,
    guarded,
    load_cli_config,
    quiet_connection_log,
)

__all__ = ["topics_check_command", "topics_create_command"]

topics_app = typer.Typer(help="Create or check the topic layout.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


@topics_app.command("create")
def topics_create_command(
    config: ConfigOption = None, bootstrap: BootstrapOption = None, verbose: VerboseOption = False
) -> None:
    """Create every topic with the configured partition count (idempotent)."""
    from pricing_ha.kafka.topics import create_topics, make_admin

    quiet_connection_log(verbose)
    with guarded():
        cfg = load_cli_config(config, bootstrap)
        for name, created in create_topics(make_admin(cfg), cfg).items():
            verb = "created" if created else "exists "
            typer.echo(f"{verb} {name} ({cfg.topics.partitions} partitions)")


@topics_app.command("check")
def topics_check_command(
    config: ConfigOption = None, bootstrap: BootstrapOption = None, verbose: VerboseOption = False
) -> None:
    """Check that every topic exists with the configured partition count."""
    from pricing_ha.kafka.topics import check_layout, make_admin

    quiet_connection_log(verbose)
    with guarded():
        cfg = load_cli_config(config, bootstrap)
        check_layout(make_admin(cfg), cfg)
        typer.echo(
            f"ok: {len(cfg.topics.by_role())} topics, {cfg.topics.partitions} partitions each"
        )
