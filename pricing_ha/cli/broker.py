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
        run_foreground(port, lambda bootstrap: typer.echo(f"broker ready: {bootstrap}"))
    except EmbeddedBrokerError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
