"""``pricing-ha broker``: an embedded broker in the foreground (local use)."""

from __future__ import annotations

from typing import Annotated

import typer

from pricing_ha.cli._app import app

__all__ = ["broker_command"]


@app.command("broker")
def broker_command(
    port: Annotated[
        int | None, typer.Option(help="TCP port on 127.0.0.1; a free one if omitted.")
    ] = None,
) -> None:
    """Run an embedded Tansu broker in the foreground until Ctrl-C or SIGTERM."""
    from pricing_ha.errors import EmbeddedBrokerError
    from pricing_ha.local.broker import run_foreground

    try:
        run_foreground(port, lambda bootstrap: typer.echo(_ready_message(bootstrap)))
    except EmbeddedBrokerError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc


def _ready_message(bootstrap: str) -> str:
    """Where the broker listens, and the three ways to point the other commands at it."""
    return (
        f"broker ready: {bootstrap}\n"
        "Point the other commands at it with one of:\n"
        f"  export PRICING_HA_BOOTSTRAP={bootstrap}\n"
        f"  pricing-ha <command> --bootstrap {bootstrap}\n"
        f'  [broker] bootstrap_servers = "{bootstrap}"   (in the --config file)\n'
        "then, once: pricing-ha topics create"
    )
