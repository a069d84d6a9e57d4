"""``pricing-ha status`` and ``pricing-ha traces``: what is running, and what happened."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._support import BootstrapOption, ConfigOption, guarded, load_cli_config

__all__ = ["status_command", "traces_command"]


@app.command("status")
def status_command(
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    window: Annotated[float, typer.Option(min=0.2, help="Seconds of heartbeats to read.")] = 2.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show which member of each group leads which partitions, and how fresh that is."""
    import dataclasses
    import json

    from pricing_ha.status import read_status, render

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        members = read_status(cfg, window)
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(m) for m in members], indent=2))
    else:
        typer.echo(render(members, cfg.topics.partitions))


@app.command("traces")
def traces_command(
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            help="Directory of JSON-lines span files (default: the telemetry.traces_dir setting).",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Where the HTML leadership timeline is written.")
    ] = Path("out/leadership.html"),
    config: ConfigOption = None,
) -> None:
    """Show a run's fail-overs from its span files: a text tree and an HTML leadership timeline."""
    from pricing_ha.local.traces_chart import write_trace_report

    with guarded():
        where = directory or load_cli_config(config, None).telemetry.traces_dir
        if not where.is_dir():
            typer.echo(f"error: no span directory at {where}", err=True)
            raise typer.Exit(1)
        write_trace_report(where, out, echo=typer.echo)
