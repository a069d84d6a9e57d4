"""The typer application every command module registers on."""

from __future__ import annotations

from typing import Annotated

import typer

import pricing_ha

__all__ = ["app"]

app = typer.Typer(
    name="pricing-ha",
    help="Continuously available price distribution over Kafka (NELI).",
    no_args_is_help=True,
    add_completion=False,
    # Plain (click-style) help: typer's rich panels show every flag as "--json <bool>", as if
    # it took a value, and cut long help texts at the terminal's width.
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"pricing-ha {pricing_ha.__version__}")
        raise typer.Exit


@app.callback()
def _main(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Continuously available price distribution over Kafka (NELI)."""
