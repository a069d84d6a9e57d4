"""The ``pricing-ha`` command line.

Each command lives in its own module; this file only wires them into one typer app.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pricing_ha.cli._options import AzOption, HealthFileOption, with_az
from pricing_ha.cli._support import (
    BootstrapOption,
    ConfigOption,
    guarded,
    load_cli_config,
    stop_requested,
)

if TYPE_CHECKING:
    from pricing_ha.config import AppConfig
    from pricing_ha.telemetry import Telemetry

app = typer.Typer(
    name="pricing-ha",
    help="Continuously available price distribution over Kafka (NELI).",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def broker(
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


@app.command()
def feed(
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
) -> None:
    """Produce synthetic (or replayed) market data to md.quotes."""
    import contextlib
    import socket

    from pricing_ha.feed.producer import feed_main, with_overrides
    from pricing_ha.member.health import broker_check, health_in_thread, write_health_file
    from pricing_ha.telemetry import HealthServer, setup_telemetry

    with guarded(), stop_requested() as should_stop, contextlib.ExitStack() as stack:
        cfg = with_az(
            with_overrides(
                load_cli_config(config, bootstrap), instruments=instruments, rate_hz=rate, seed=seed
            ),
            az,
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
        summary = feed_main(
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


topics_app = typer.Typer(help="Create or check the topic layout.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


@topics_app.command("create")
def topics_create(config: ConfigOption = None, bootstrap: BootstrapOption = None) -> None:
    """Create every topic with the configured partition count (idempotent)."""
    from pricing_ha.kafka.topics import create_topics, make_admin

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        for name, created in create_topics(make_admin(cfg), cfg).items():
            verb = "created" if created else "exists "
            typer.echo(f"{verb} {name} ({cfg.topics.partitions} partitions)")


@topics_app.command("check")
def topics_check(config: ConfigOption = None, bootstrap: BootstrapOption = None) -> None:
    """Check that every topic exists with the configured partition count."""
    from pricing_ha.kafka.topics import check_layout, make_admin

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        check_layout(make_admin(cfg), cfg)
        typer.echo(
            f"ok: {len(cfg.topics.by_role())} topics, {cfg.topics.partitions} partitions each"
        )


@app.command()
def run(
    group: Annotated[str, typer.Option("--group", help="Publishing group: p1 or p2.")],
    member: Annotated[
        str | None, typer.Option(help="Member name within the group (default: host-pid).")
    ] = None,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    *,
    az: AzOption = None,
    health_file: HealthFileOption = None,
) -> None:
    """Run one publisher member of GROUP: NELI non-exclusive, prices md.quotes to prices.raw.

    Serves /healthz, /readyz and /metrics on health.host and health.publisher_port.
    """
    from pricing_ha.publishing.publisher import serve_publisher

    _serve_member(
        "publisher",
        group,
        member,
        (config, bootstrap, az),
        lambda cfg, name, tel: serve_publisher(
            cfg, group, name, telemetry=tel, health_file=health_file
        ),
    )


@app.command()
def dedupe(
    member: Annotated[str | None, typer.Option(help="Member name (default: host-pid).")] = None,
    group: Annotated[str, typer.Option(help="Relay group (one per deployment).")] = "relay",
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    *,
    az: AzOption = None,
    health_file: HealthFileOption = None,
) -> None:
    """Run one relay member: exclusive owner per partition, writes deduplicated `prices`.

    Serves /healthz, /readyz and /metrics on health.host and health.relay_port.
    """
    from pricing_ha.dedupe.relay import serve_relay

    _serve_member(
        "relay",
        group,
        member,
        (config, bootstrap, az),
        lambda cfg, name, tel: serve_relay(
            cfg, name, group, telemetry=tel, health_file=health_file
        ),
    )


def _serve_member(
    role: str,
    group: str,
    member: str | None,
    sources: tuple[Path | None, str | None, str | None],
    serve: Callable[[AppConfig, str, Telemetry], Coroutine[Any, Any, None]],
) -> None:
    """Load and check the configuration, set up telemetry, run ``serve`` on uvloop."""
    import logging
    import os
    import socket

    from pricing_ha import aio
    from pricing_ha.kafka.topics import check_layout, make_admin
    from pricing_ha.telemetry import setup_telemetry

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config, bootstrap, az = sources
    with guarded():
        cfg = with_az(load_cli_config(config, bootstrap), az)
        check_layout(make_admin(cfg), cfg)
        name = member or f"{socket.gethostname()}-{os.getpid()}"
        telemetry = setup_telemetry(
            cfg, service_role=role, group=group, member=name, set_global=True
        )
        try:
            aio.run(serve(cfg, name, telemetry))
        finally:
            telemetry.shutdown()


@app.command()
def traces(
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
    from pricing_ha.local.traces_view import traces_main

    with guarded():
        where = directory or load_cli_config(config, None).telemetry.traces_dir
        if not where.is_dir():
            typer.echo(f"error: no span directory at {where}", err=True)
            raise typer.Exit(1)
        traces_main(where, out, echo=typer.echo)


@app.command()
def status(
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


@app.command()
def demo(
    *,
    bootstrap: Annotated[
        str | None, typer.Option(help="Use this broker instead of an embedded one.")
    ] = None,
    duration: Annotated[float, typer.Option(min=10, help="Seconds of market data.")] = 45.0,
    instruments: Annotated[int, typer.Option(min=1, help="Instruments in the feed.")] = 20,
    rate: Annotated[float, typer.Option(min=0.5, help="Quotes/s per instrument.")] = 10.0,
    partitions: Annotated[int, typer.Option(min=1, help="Partitions of every topic.")] = 4,
    session_ms: Annotated[int, typer.Option(min=1000, help="Session timeout S (ms).")] = 3000,
    workdir: Annotated[
        Path | None, typer.Option(help="Where logs, summaries and traces go (default: a temp dir).")
    ] = None,
    live: Annotated[bool, typer.Option(help="Show the live view while it runs.")] = True,
) -> None:
    """The whole system with injected fail-overs; exits 0 only if nothing was lost or duplicated."""
    from pricing_ha.local.demo import DemoOptions, run_demo

    options = DemoOptions(
        bootstrap=bootstrap,
        duration_s=duration,
        instruments=instruments,
        rate_hz=rate,
        partitions=partitions,
        session_ms=session_ms,
        workdir=workdir,
        live=live,
    )
    with guarded():
        result = run_demo(options, out=typer.echo)
    if not result.ok:
        raise typer.Exit(1)


@app.command("neli-demo")
def neli_demo(
    bootstrap: Annotated[
        str | None, typer.Option(help="Use this broker instead of an embedded one.")
    ] = None,
    members: Annotated[int, typer.Option(min=2, help="Members in the NELI group.")] = 3,
    partitions: Annotated[int, typer.Option(min=1, help="Partitions of the NELI topic.")] = 6,
    session_ms: Annotated[int, typer.Option(min=1000, help="Session timeout S (ms).")] = 3000,
) -> None:
    """NELI alone: members in separate processes, one killed, leadership moving."""
    from pricing_ha.local.neli_demo import run_neli_demo

    result = run_neli_demo(
        bootstrap=bootstrap, members=members, partitions=partitions, session_ms=session_ms
    )
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def subscribe(
    *,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    instrument: Annotated[
        list[str] | None, typer.Option(help="Only this instrument (repeatable).")
    ] = None,
    direct: Annotated[
        bool, typer.Option(help="Arbitrate prices.raw (both groups) here: no relay hop.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print prices as JSON lines.")] = False,
    from_beginning: Annotated[
        bool, typer.Option(help="Read from the beginning of the topic instead of its end.")
    ] = False,
    duration: Annotated[
        float | None, typer.Option(min=0, help="Stop after this many seconds.")
    ] = None,
    summary_out: Annotated[
        Path | None, typer.Option(help="Write the verdict here (JSON): gaps, duplicates, ...")
    ] = None,
) -> None:
    """Subscribe to prices: in order, each seq once, gaps and duplicates reported."""
    from pricing_ha.cli.subscribe import subscribe_main

    with guarded(), stop_requested() as should_stop:
        subscribe_main(
            load_cli_config(config, bootstrap),
            instruments=instrument,
            direct=direct,
            as_json=as_json,
            from_beginning=from_beginning,
            duration_s=duration,
            summary_out=summary_out,
            should_stop=should_stop,
            echo=typer.echo,
            echo_err=lambda line: typer.echo(line, err=True),
        )


def main() -> None:
    """Console-script entry point."""
    app()
