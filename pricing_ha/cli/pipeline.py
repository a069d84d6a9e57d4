"""``pricing-ha pipeline ingest|availability|reconcile|bars|report``: the Spark jobs.

Topics and bootstrap come from the configuration; ``--master`` picks the Spark master
(``local[*]`` by default; any cluster URL, or run the same commands under ``spark-submit``).
PySpark is imported only inside these commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._support import (
    BootstrapOption,
    ConfigOption,
    guarded,
    load_cli_config,
    stop_requested,
)

if TYPE_CHECKING:
    from pricing_ha.config import AppConfig
    from pricing_ha.pipeline.jobs import Inputs

__all__ = [
    "pipeline_availability_command",
    "pipeline_bars_command",
    "pipeline_ingest_command",
    "pipeline_reconcile_command",
    "pipeline_report_command",
]

pipeline_app = typer.Typer(
    help="Spark jobs over the topics: ingest, availability, reconcile, bars, report.",
    no_args_is_help=True,
)
app.add_typer(pipeline_app, name="pipeline")

MasterOption = Annotated[
    str, typer.Option("--master", help="Spark master URL (local[*], local[2], spark://...).")
]
OutOption = Annotated[
    Path, typer.Option("--out", help="Output directory: landed records, tables, report.")
]
SourceOption = Annotated[
    str,
    typer.Option(
        "--source",
        help="records: the Parquet that ingest landed in --out; topics: read the topics now.",
    ),
]


def _inputs(master: str, cfg: AppConfig, out: Path, source: str) -> Inputs:
    from pricing_ha.pipeline.jobs import load_inputs
    from pricing_ha.pipeline.session import spark_session

    if source not in {"records", "topics"}:
        raise typer.BadParameter("--source must be 'records' or 'topics'")
    return load_inputs(spark_session(master), cfg, out, source=source)


@pipeline_app.command("ingest")
def pipeline_ingest_command(
    *,
    out: OutOption = Path("pipeline-out"),
    until_end: Annotated[
        bool,
        typer.Option(
            "--until-end",
            help="Batch: land everything up to the topics' current end, then exit. "
            "Default: Structured Streaming (checkpointed in OUT/_checkpoint), one "
            "availableNow query every --trigger-s seconds until Ctrl-C/SIGTERM.",
        ),
    ] = False,
    trigger_s: Annotated[
        float,
        typer.Option(
            min=0.5,
            help="Streaming: seconds between the starts of two availableNow queries.",
        ),
    ] = 2.0,
    master: MasterOption = "local[*]",
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Land the topics (quotes, raw prices, prices, DLQs) in Parquet under OUT/records."""
    from pricing_ha.pipeline.ingest import ingest_batch, ingest_stream
    from pricing_ha.pipeline.session import spark_session

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        spark = spark_session(master)
        if until_end:
            n = ingest_batch(spark, cfg, out)
            typer.echo(f"ingested {n} records into {out / 'records'}")
            return
        with stop_requested() as should_stop:
            typer.echo(f"ingesting into {out / 'records'} until Ctrl-C ...")
            n = ingest_stream(spark, cfg, out, should_stop=should_stop, every_s=trigger_s)
        typer.echo(f"ingested {n} records; the checkpoint says where a restart resumes")


@pipeline_app.command("availability")
def pipeline_availability_command(
    *,
    out: OutOption = Path("pipeline-out"),
    source: SourceOption = "records",
    master: MasterOption = "local[*]",
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Availability per instrument, fail-overs, leadership and first-delivery share."""
    from pricing_ha.pipeline.jobs import availability_job

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        tables = availability_job(_inputs(master, cfg, out, source), out)
        tables["availability"].orderBy("instrument").show(1000, truncate=False)
        tables["first_delivery"].show(truncate=False)
        typer.echo(f"{tables['failovers'].count()} fail-over rows; tables in {out}")


@pipeline_app.command("reconcile")
def pipeline_reconcile_command(
    *,
    out: OutOption = Path("pipeline-out"),
    source: SourceOption = "records",
    master: MasterOption = "local[*]",
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """The exactly-once verdict; exits 1 and names the offending rows when it fails."""
    from pricing_ha.pipeline.jobs import reconcile_job

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        result = reconcile_job(_inputs(master, cfg, out, source), out)
    typer.echo(result.render())
    if not result.ok:
        raise typer.Exit(1)


@pipeline_app.command("bars")
def pipeline_bars_command(
    *,
    out: OutOption = Path("pipeline-out"),
    interval_s: Annotated[int, typer.Option(min=1, help="Bar length, seconds.")] = 60,
    source: SourceOption = "records",
    master: MasterOption = "local[*]",
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """OHLC bars of mid per instrument per interval, into OUT/bars."""
    from pricing_ha.pipeline.jobs import bars_job

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        df = bars_job(_inputs(master, cfg, out, source), out, interval_s)
        typer.echo(f"{df.count()} bars in {out / 'bars'}")


@pipeline_app.command("report")
def pipeline_report_command(
    *,
    out: OutOption = Path("pipeline-out"),
    interval_s: Annotated[int, typer.Option(min=1, help="Bar length, seconds.")] = 60,
    source: SourceOption = "records",
    master: MasterOption = "local[*]",
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Every table plus OUT/report.html; exits 1 if the exactly-once verdict fails."""
    from pricing_ha.pipeline.report import report_job

    with guarded():
        cfg = load_cli_config(config, bootstrap)
        result = report_job(_inputs(master, cfg, out, source), out, interval_s)
    typer.echo(result.verdict.render())
    typer.echo(f"report: {result.html}")
    if not result.verdict.ok:
        raise typer.Exit(1)
