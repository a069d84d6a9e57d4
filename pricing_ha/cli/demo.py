"""``pricing-ha demo`` and ``pricing-ha neli-demo``: the system (or NELI alone) on one machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._support import guarded

__all__ = ["demo_command", "neli_demo_command"]


@app.command("demo")
def demo_command(
    *,
    bootstrap: Annotated[
        str | None, typer.Option(help="Use this broker instead of starting a local Apache Kafka.")
    ] = None,
    nodes: Annotated[
        int,
        typer.Option(
            help="Nodes of the local Apache Kafka: 1, or 3 (racks a/b/c, topics at replication "
            "factor 3 and min.insync.replicas 2; adds a broker SIGKILL and the loss of AZ a - "
            "broker 1 with P1 and the AZ's relay - to the faults).",
        ),
    ] = 1,
    duration: Annotated[float, typer.Option(min=10, help="Seconds of market data.")] = 45.0,
    instruments: Annotated[int, typer.Option(min=1, help="Instruments in the feed.")] = 20,
    rate: Annotated[float, typer.Option(min=0.5, help="Quotes/s per instrument.")] = 10.0,
    partitions: Annotated[int, typer.Option(min=1, help="Partitions of every topic.")] = 4,
    session_ms: Annotated[int, typer.Option(min=1000, help="Session timeout S (ms).")] = 3000,
    workdir: Annotated[
        Path | None, typer.Option(help="Where logs, summaries and traces go (default: a temp dir).")
    ] = None,
    live: Annotated[bool, typer.Option(help="Show the live view while it runs.")] = True,
    report: Annotated[
        bool,
        typer.Option(
            "--report",
            help="At the end, land the topics with the Spark pipeline and write its HTML report "
            "(WORKDIR/pipeline/report.html); needs PySpark and Java.",
        ),
    ] = False,
    silence_bound: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Availability bound: the longest silence (s) per instrument on prices. "
            "Default: 2 ticks of the feed (2 / RATE) + the relay's reorder window.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The whole system with injected fail-overs, and a verdict on availability and delivery.

    Exit status: 0 OK (every price exactly once and in order, no instrument silent longer
    than the bound); 5 DEGRADED (exactly once and in order, but a silence over the bound: each
    breach is printed with its cause); 1 FAILED (a price lost, duplicated or out of order, or
    the subscriber or --report found a defect). 2, 3, 4: the configuration, the broker or the
    topic layout (as every command). Today a run is usually DEGRADED: a relay fail-over leaves
    its partitions silent for several seconds (docs/architecture.md section 8).
    """
    from pricing_ha.local.demo import DemoOptions, run_demo

    if nodes not in (1, 3):
        raise typer.BadParameter("1 or 3", param_hint="--nodes")
    if nodes != 1 and bootstrap is not None:
        raise typer.BadParameter(
            "a three-node demo kills and freezes brokers of its own: drop --bootstrap",
            param_hint="--nodes",
        )
    options = DemoOptions(
        bootstrap=bootstrap,
        nodes=nodes,
        duration_s=duration,
        instruments=instruments,
        rate_hz=rate,
        partitions=partitions,
        session_ms=session_ms,
        workdir=workdir,
        live=live,
        report=report,
        silence_bound_s=silence_bound,
    )
    with guarded():
        result = run_demo(options, out=typer.echo)
    if result.state.exit_code != 0:
        raise typer.Exit(result.state.exit_code)


@app.command("neli-demo")
def neli_demo_command(
    bootstrap: Annotated[
        str | None, typer.Option(help="Use this broker instead of starting a local Apache Kafka.")
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
