"""``pricing-ha reset-mark``: an operator's reset of one instrument's mark on the relays."""

from __future__ import annotations

import contextlib
import socket
from typing import Annotated

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

__all__ = ["reset_mark_command"]


@app.command("reset-mark")
def reset_mark_command(
    instrument: Annotated[str, typer.Argument(help="The instrument whose mark is reset.")],
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    *,
    operator: Annotated[
        str | None, typer.Option(help="Who asks (logged and traced; default: user@host).")
    ] = None,
    verbose: VerboseOption = False,
) -> None:
    """Reset INSTRUMENT's mark on every relay (owner and standbys), e.g. after a bad jump.

    Writes a reset control record to the instrument's partition of `prices`; the relays
    forget the instrument's highest (epoch, seq) and start again from its next price.
    """
    from pricing_ha.dedupe.mark_reset import write_reset
    from pricing_ha.telemetry import setup_telemetry

    quiet_connection_log(verbose)
    with guarded(), contextlib.ExitStack() as stack:
        cfg = load_cli_config(config, bootstrap)
        telemetry = setup_telemetry(
            cfg, service_role="operator", group=None, member=socket.gethostname(), set_global=True
        )
        stack.callback(telemetry.shutdown)
        partition, offset = write_reset(cfg, instrument, operator=operator)
        typer.echo(
            f"reset of {instrument} written to {cfg.topics.prices}[{partition}] at offset {offset}"
        )
