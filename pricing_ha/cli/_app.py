"""The typer application every command module registers on."""

from __future__ import annotations

import typer

__all__ = ["app"]

app = typer.Typer(
    name="pricing-ha",
    help="Continuously available price distribution over Kafka (NELI).",
    no_args_is_help=True,
    add_completion=False,
)
