"""The body of ``pricing-ha subscribe``: a live table or JSON lines, and a final verdict.

The live table (per instrument: last seq, delivered, gaps, duplicates, staleness, longest
silence) is a ``rich`` live display on a terminal, redrawn in place every ``refresh_s``
(:mod:`pricing_ha.cli.subscribe_view`), and printed as plain text every ``refresh_s`` when
stdout is a file or a pipe (:class:`~pricing_ha.screen.LiveScreen`).
``--json`` prints one JSON object per delivered price instead. The verdict
(:meth:`~pricing_ha.subscribing.stats.SubscriberStats.summary`) is written to
``--summary-out`` so that the demo and the tests can compare it with the feed's summary.

The subscriber is traced and measured (:mod:`pricing_ha.telemetry`, role ``subscriber``) and
serves ``/healthz``, ``/readyz`` (broker reachable, partitions assigned) and ``/metrics`` on
``[health] host`` and ``subscriber_port`` while it runs; the URL goes to the diagnostics.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated

import orjson
import typer

from pricing_ha import aio
from pricing_ha.cli._app import app
from pricing_ha.cli._support import (
    BootstrapOption,
    ConfigOption,
    VerboseOption,
    guarded,
    load_cli_config,
    quiet_connection_log,
    stop_requested,
)
from pricing_ha.cli.subscribe_view import subscriber_table
from pricing_ha.config import AppConfig
from pricing_ha.member.health import broker_check, write_health_file
from pricing_ha.screen import LiveScreen
from pricing_ha.subscribing.stats import SubscriberStats
from pricing_ha.subscribing.subscriber import Delivery, Subscriber
from pricing_ha.telemetry import (
    HealthServer,
    Telemetry,
    health_port,
    setup_telemetry,
)

__all__ = ["delivery_json", "run_subscriber", "subscribe_command"]


def delivery_json(d: Delivery) -> bytes:
    """One delivery as a compact JSON object (the ``--json`` output)."""
    p = d.price
    return orjson.dumps(
        {
            "instrument": p.instrument,
            "seq": p.seq,
            "bid": p.bid,
            "ask": p.ask,
            "mid": p.mid,
            "source_time_ns": p.source_time_ns,
            "partition": d.partition,
            "offset": d.offset,
            "source": d.source,
            "gap_before": d.gap_before,
            "switched_from": d.switched_from,
            "received_ns": d.received_ns,
            "latency_ms": round(d.latency_s * 1000, 3),
        }
    )


_STALE_CHECK_S = 0.25  # how often ongoing silences are measured (see check_staleness)


def _assigned(sub: Subscriber) -> bool:
    if not sub.started:
        raise RuntimeError("the partitions are not assigned (yet)")
    return True


async def _run(
    sub: Subscriber,
    *,
    as_json: bool,
    duration_s: float | None,
    screen: LiveScreen,
    should_stop: Callable[[], bool],
    echo: Callable[[str], object],
    on_started: Callable[[], object] = lambda: None,
) -> None:
    start = time.monotonic()
    next_stale_check = start
    async with sub:
        on_started()
        while not should_stop():
            now = time.monotonic()
            if duration_s is not None and now - start >= duration_s:
                break
            wait = 0.1
            if duration_s is not None:
                wait = max(0.0, min(wait, start + duration_s - now))
            deliveries = await sub.poll(wait)
            if time.monotonic() >= next_stale_check:
                next_stale_check = time.monotonic() + _STALE_CHECK_S
                sub.stats.check_staleness(time.monotonic())
            if as_json:
                if deliveries:
                    echo(b"\n".join(delivery_json(d) for d in deliveries).decode())
            else:
                screen.tick()


def run_subscriber(
    cfg: AppConfig,
    *,
    instruments: Iterable[str] | None = None,
    direct: bool = False,
    as_json: bool = False,
    from_beginning: bool = False,
    duration_s: float | None = None,
    refresh_s: float = 1.0,
    summary_out: Path | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    echo: Callable[[str], object],
    echo_err: Callable[[str], object],
    telemetry: Telemetry | None = None,
    health_file: Path | None = None,
) -> SubscriberStats:
    """Subscribes until ``should_stop()``, or for ``duration_s``; then reports.

    Args:
        cfg: the application configuration.
        instruments: only these instruments (all when ``None`` or empty).
        direct: arbitrate ``prices.raw`` instead of reading ``prices``.
        as_json: print each delivered price as a JSON line instead of the live table.
        from_beginning: read every partition from its beginning instead of its end.
        duration_s: stop after this many seconds (``None``: until stopped).
        refresh_s: interval of the live table.
        summary_out: write the verdict here (JSON).
        should_stop: polled between polls of the topic (e.g. set by SIGTERM).
        echo: prints one piece of standard output.
        echo_err: prints one line of diagnostics.
        telemetry: where spans and metrics go; by default set up here (and shut down at the
            end) for role ``subscriber``.
        health_file: write the health endpoints' URL here (JSON), once they listen.

    Returns:
        The subscriber's statistics.

    Raises:
        BrokerUnavailableError: if the broker does not answer.
        TopicLayoutError: if the topic does not exist.
    """
    tel = telemetry or setup_telemetry(
        cfg,
        service_role="subscriber",
        group=None,
        member=f"{socket.gethostname()}-{os.getpid()}",
    )
    sub = Subscriber(
        cfg,
        direct=direct,
        instruments=instruments or None,
        from_beginning=from_beginning,
        telemetry=tel,
    )
    health = HealthServer(
        cfg.health.host, health_port(cfg.health, "subscriber"), metrics=tel.prometheus_text
    )
    health.add_check("broker", broker_check(cfg))
    health.add_check("subscriber", lambda: _assigned(sub))

    screen = LiveScreen(
        lambda: subscriber_table(sub.stats, time.monotonic()),
        lambda: f"{sub.stats.render(time.monotonic())}\n",
        echo,
        enabled=not as_json,
        terminal_every_s=refresh_s,
        plain_every_s=refresh_s,
    )
    screen.skip(refresh_s)  # the first table once a refresh has been read

    async def run() -> None:
        async with health:
            if health_file is not None:
                write_health_file(health_file, health.url, role="subscriber")
            with screen:
                await _run(
                    sub,
                    as_json=as_json,
                    duration_s=duration_s,
                    screen=screen,
                    should_stop=should_stop,
                    echo=echo,
                    # Said once the broker has answered: a start that fails says only why.
                    on_started=lambda: echo_err(f"health: {health.url}/healthz /readyz /metrics"),
                )

    try:
        aio.run(run())
    finally:
        if telemetry is None:
            tel.shutdown()
    stats = sub.stats
    if summary_out is not None:
        summary_out.parent.mkdir(parents=True, exist_ok=True)
        summary_out.write_bytes(
            orjson.dumps(stats.summary(), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
        )
    if as_json:
        s = stats.summary()
        echo_err(
            f"{s['mode']}: {s['delivered']} delivered, {s['gaps']} gaps, "
            f"{s['duplicates']} duplicates, longest silence {s['max_silence_s'] * 1000:.0f} ms"
        )
    elif not screen.on_terminal:  # a terminal keeps the live table's final frame
        echo(stats.render(time.monotonic()))
    return stats


@app.command("subscribe")
def subscribe_command(
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
    verbose: VerboseOption = False,
) -> None:
    """Subscribe to prices: in order, each seq once, gaps and duplicates reported."""
    quiet_connection_log(verbose)
    with guarded(), stop_requested() as should_stop:
        run_subscriber(
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
