"""``pricing-ha feed``: synthetic or replayed market data to ``md.quotes``."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._options import (
    AzOption,
    HealthFileOption,
    JsonLogsOption,
    with_az,
    with_json_logs,
)
from pricing_ha.cli._support import (
    BootstrapOption,
    ConfigOption,
    VerboseOption,
    guarded,
    load_cli_config,
    quiet_connection_log,
    stop_requested,
)

__all__ = ["feed_command"]

#: The collector's thresholds while the feed produces (CPython's defaults: 700, 10, 10).
_PRODUCING_GC_THRESHOLD = (10_000, 50, 100)


@contextlib.contextmanager
def _collector_for_producing() -> Iterator[None]:
    """Keep the garbage collector off the feed's per-quote path, then put it back.

    The feed allocates a few short-lived objects per quote (freed by reference counting, not
    by the collector), and with the default thresholds the collector keeps walking what
    start-up built (modules, telemetry, the CLI) while that is still young. Freezing it and
    collecting less often cut the feed's CPU by 1.5-2.5 µs per quote over runs of 400,000
    unpaced quotes (A/B, three rounds, start-up included: most of it in the first seconds);
    in a steady window at 50,000/s the difference was within the noise (8.1 against 8.4).
    """
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*_PRODUCING_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


@app.command("feed")
def feed_command(
    *,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    count: Annotated[int | None, typer.Option(min=1, help="Stop after N quotes in total.")] = None,
    duration: Annotated[
        float | None, typer.Option(min=0, help="Stop after this many seconds.")
    ] = None,
    rate: Annotated[
        float | None, typer.Option(help="Quotes per second per instrument (0: unpaced).")
    ] = None,
    instruments: Annotated[int | None, typer.Option(help="Number of instruments.")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    replay: Annotated[
        Path | None, typer.Option(help="CSV file: instrument,seq,bid,ask[,source_time_ns].")
    ] = None,
    summary_out: Annotated[
        Path | None, typer.Option(help="Write the final per-instrument state here (JSON).")
    ] = None,
    az: AzOption = None,
    health_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Serve /healthz, /readyz, /metrics here (0: a free port)."
        ),
    ] = None,
    health_file: HealthFileOption = None,
    verbose: VerboseOption = False,
    json_logs: JsonLogsOption = False,
) -> None:
    """Produce synthetic (or replayed) market data to md.quotes."""
    import socket

    from pricing_ha.feed.producer import run_configured_feed, with_overrides
    from pricing_ha.member.health import broker_check, health_in_thread, write_health_file
    from pricing_ha.telemetry import HealthServer, setup_telemetry

    quiet_connection_log(verbose)
    with guarded(), stop_requested() as should_stop, contextlib.ExitStack() as stack:
        cfg = with_json_logs(
            with_az(
                with_overrides(
                    load_cli_config(config, bootstrap),
                    instruments=instruments,
                    rate_hz=rate,
                    seed=seed,
                ),
                az,
            ),
            json_logs,
        )
        telemetry = setup_telemetry(
            cfg, service_role="feed", group=None, member=socket.gethostname(), set_global=True
        )
        stack.callback(telemetry.shutdown)
        if health_port is not None or health_file is not None:
            server = HealthServer(
                cfg.health.host, health_port or 0, metrics=telemetry.prometheus_text
            )
            server.add_check("broker", broker_check(cfg))
            stack.enter_context(health_in_thread(server))
            typer.echo(f"health: {server.url}/healthz /readyz /metrics")
            if health_file is not None:
                write_health_file(health_file, server.url, role="feed")
        stack.enter_context(_collector_for_producing())
        summary = run_configured_feed(
            cfg,
            replay=replay,
            count=count,
            duration_s=duration,
            summary_out=summary_out,
            should_stop=should_stop,
            echo=typer.echo,
            price_path=telemetry.price_path(),
        )
    if not summary.ok:
        typer.echo("error: not every quote was delivered", err=True)
        raise typer.Exit(1)
