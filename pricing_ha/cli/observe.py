"""``pricing-ha status`` and ``pricing-ha traces``: what is running, and what happened."""

from __future__ import annotations

from pathlib import Path
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
from pricing_ha.config import AppConfig

__all__ = ["status_command", "traces_command"]


@app.command("status")
def status_command(
    *,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    window: Annotated[
        float,
        typer.Option(
            min=0.2,
            help="Seconds of heartbeats to read (with --instrument, an owner that led before "
            "the read began shows as 'since before').",
        ),
    ] = 2.0,
    instrument: Annotated[
        str | None,
        typer.Option(
            "--instrument",
            metavar="SYM",
            help="Only this instrument: who owns it now in each group, since when, how stale.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    verbose: VerboseOption = False,
) -> None:
    """Show every configured group: its members, what they lead, which partitions nobody leads.

    A configured group with no member heartbeating is marked ABSENT; groups seen on the NELI
    topic but missing from the configuration's [groups] are listed too.
    """
    import dataclasses
    import json

    from pricing_ha.status import (
        group_status,
        read_instrument_owners,
        read_status,
        render,
        render_owners,
    )

    quiet_connection_log(verbose)
    with guarded():
        cfg = load_cli_config(config, bootstrap)
        if instrument is not None:
            _check_instrument(cfg, instrument)
            owners = read_instrument_owners(cfg, instrument, [g for g, _ in _groups(cfg)], window)
            typer.echo(
                json.dumps(dataclasses.asdict(owners), indent=2)
                if as_json
                else render_owners(owners)
            )
            return
        groups = group_status(read_status(cfg, window), _groups(cfg), cfg.topics.partitions)
    if as_json:
        doc = {
            "partitions": cfg.topics.partitions,
            "window_s": window,
            "groups": [dataclasses.asdict(g) for g in groups],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(render(groups, window))


def _groups(cfg: AppConfig) -> list[tuple[str, str]]:
    """``(NELI group id, role)`` of the configured groups: publishing groups, then the relay."""
    from pricing_ha.dedupe.relay import relay_group_id
    from pricing_ha.publishing.publisher import neli_group_id

    publishing = [(neli_group_id(g), "publishing") for g in cfg.groups.publishing]
    return [*publishing, (relay_group_id(cfg.groups.relay), "relay")]


def _check_instrument(cfg: AppConfig, symbol: str) -> None:
    """Exit 2 unless ``symbol`` is a configured instrument (the feed's or a pricing override)."""
    from pricing_ha.feed.sources import feed_symbols

    fed = feed_symbols(cfg.feed)
    known = [*fed, *(s for s in cfg.pricing.instruments if s not in fed)]
    if symbol in known:
        return
    close = [k for k in known if k.casefold() == symbol.casefold()]
    hint = f"; did you mean {close[0]}?" if close else ""
    shown = ", ".join(known[:8]) + (f", ... ({len(known)} in all)" if len(known) > 8 else "")
    typer.echo(
        f"error: unknown instrument {symbol!r}: not one of the configured instruments "
        f"([feed] symbols or instruments, [pricing.instruments]): {shown}{hint}",
        err=True,
    )
    raise typer.Exit(2)


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
