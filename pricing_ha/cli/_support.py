"""Shared pieces of the command line: the common options, error handling and stop signals.

Every command takes ``--config`` and ``--bootstrap`` the same way (typer reads them from
``$PRICING_HA_CONFIG`` and ``$PRICING_HA_BOOTSTRAP`` when not given) and ends on a
:class:`~pricing_ha.errors.PricingError` the same way: its message on stderr, no traceback, and
the error's ``exit_code`` (2 configuration, 3 broker unavailable, 4 topic layout, 1 otherwise).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from pricing_ha.config import AppConfig, load_app_config
from pricing_ha.errors import PricingError

__all__ = [
    "BootstrapOption",
    "ConfigOption",
    "VerboseOption",
    "guarded",
    "load_cli_config",
    "quiet_connection_log",
    "stop_requested",
]

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar="PRICING_HA_CONFIG",
        help="TOML configuration file. Default: $PRICING_HA_CONFIG, else the repository's "
        "config/default.toml when present, else the built-in defaults.",
        show_default=False,
    ),
]
BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap",
        envvar="PRICING_HA_BOOTSTRAP",
        help="Broker bootstrap servers; overrides the configuration.",
        show_default=False,
    ),
]

VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose",
        help="Show librdkafka's full log (every connection attempt) instead of one clear line.",
    ),
]


def quiet_connection_log(
    verbose: bool, *, level: int = logging.WARNING, fmt: str | None = None
) -> None:
    """Set up logging for a command that connects (see :mod:`pricing_ha.kafka.client_log`)."""
    from pricing_ha.kafka.client_log import configure_logging

    configure_logging(verbose=verbose, level=level, fmt=fmt)


@contextmanager
def guarded() -> Iterator[None]:
    """Turns a :class:`PricingError` into its message on stderr and its exit code."""
    try:
        yield
    except PricingError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from exc


def load_cli_config(config: Path | None, bootstrap: str | None) -> AppConfig:
    """Loads the configuration from the ``--config`` and ``--bootstrap`` options.

    Raises:
        ConfigError: if the configuration is invalid (use inside :func:`guarded`).
    """
    return load_app_config(config, bootstrap=bootstrap)


@contextmanager
def stop_requested() -> Iterator[Callable[[], bool]]:
    """Yields a ``should_stop()`` that turns True on SIGINT or SIGTERM.

    The previous handlers are restored on exit, so a second Ctrl-C after the block behaves as
    usual. Must be entered from the main thread.
    """
    stop = threading.Event()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop.is_set
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
