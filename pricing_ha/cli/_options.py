"""Telemetry and health options shared by the long-running commands (``run``, ``dedupe``, ``feed``).

``--az`` overrides ``[telemetry] az`` (as ``PRICING_HA__TELEMETRY__AZ`` does); ``--json-logs``
turns ``[telemetry] json_logs`` on; ``--health-file``
names a file where the process writes ``{"url": "http://host:port", ...}`` once its health
endpoints listen, so that tests, the demo and scripts find a port picked at random.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from pricing_ha.config import AppConfig
from pricing_ha.errors import ConfigError

__all__ = ["AzOption", "HealthFileOption", "JsonLogsOption", "with_az", "with_json_logs"]

AzOption = Annotated[
    str | None,
    typer.Option(
        "--az",
        help="Availability zone reported in telemetry; overrides the telemetry.az setting.",
        show_default=False,
    ),
]
HealthFileOption = Annotated[
    Path | None,
    typer.Option(
        "--health-file",
        help='Write {"url": ...} of the /healthz, /readyz, /metrics server here (JSON).',
        show_default=False,
    ),
]

JsonLogsOption = Annotated[
    bool,
    typer.Option(
        "--json-logs",
        help="Log JSON lines with trace_id and span_id; sets telemetry.json_logs.",
    ),
]


def with_json_logs(cfg: AppConfig, json_logs: bool) -> AppConfig:
    """``cfg`` with ``[telemetry] json_logs`` on when ``--json-logs`` was given; JSON log lines
    (:mod:`pricing_ha.telemetry.json_logs`) from now on when it is on either way."""
    if json_logs and not cfg.telemetry.json_logs:
        cfg = dataclasses.replace(cfg, telemetry=dataclasses.replace(cfg.telemetry, json_logs=True))
    if cfg.telemetry.json_logs:
        from pricing_ha.telemetry.json_logs import use_json_logs

        use_json_logs()
    return cfg


def with_az(cfg: AppConfig, az: str | None) -> AppConfig:
    """``cfg`` with ``[telemetry] az`` set to ``az``, if given.

    Raises:
        ConfigError: ``az`` is empty.
    """
    if az is None:
        return cfg
    try:
        telemetry = dataclasses.replace(cfg.telemetry, az=az)
    except ConfigError as exc:
        raise ConfigError("command line", "--az", exc.problem) from exc
    return dataclasses.replace(cfg, telemetry=telemetry)
