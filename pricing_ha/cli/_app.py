"""The typer application every command module registers on."""

from __future__ import annotations

import typer

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
