"""``pricing-ha broker``: a local Apache Kafka in the foreground (local use)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pricing_ha.cli._app import app

__all__ = ["broker_command"]


@app.command("broker")
def broker_command(
    *,
    nodes: Annotated[
        int,
        typer.Option(
            help="1, or 3 (racks a/b/c, replication factor 3, min.insync.replicas 2).",
            min=1,
            max=3,
        ),
    ] = 1,
    workdir: Annotated[
        Path | None,
        typer.Option(
            help="Where each node keeps its config, log and data (kept after exit);"
            " a temporary directory, removed at exit, if omitted."
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address of the client listeners (controllers: 127.0.0.1).")
    ] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            help="Client port of node 1 (node N: PORT+N-1); free ports if omitted. With"
            " --hosts: every node's client port, PORT+1 its controller's."
        ),
    ] = None,
    hosts: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated address of each node (nodes on different hosts or network"
            " namespaces): node N's client and controller listeners bind to the Nth."
        ),
    ] = None,
    node_id: Annotated[
        int | None,
        typer.Option(
            help="Run only this node of the --nodes cluster (needs --hosts, --port and"
            " --cluster-id; run the others the same way, each on its own host)."
        ),
    ] = None,
    cluster_id: Annotated[
        str | None,
        typer.Option(help="KRaft cluster id to format with (the same for every --node-id)."),
    ] = None,
    startup_timeout: Annotated[
        float,
        typer.Option(
            min=1,
            help="Seconds to wait for the cluster to answer (a --node-id node waits for a"
            " quorum, hence for the other nodes to start too).",
        ),
    ] = 60.0,
    secured: Annotated[
        bool,
        typer.Option(
            help="SASL/SCRAM over TLS, the standard authorizer and one user per role with the"
            " role table's ACLs (docs/threat-model.md); plain if omitted."
        ),
    ] = False,
) -> None:
    """Run Apache Kafka (KRaft) on 127.0.0.1 in the foreground until Ctrl-C or SIGTERM.

    With --node-id, run one node of a cluster spread over hosts (scripts/az-rehearsal).
    """
    from pricing_ha.errors import LocalKafkaError
    from pricing_ha.local.broker import run_foreground

    if nodes == 2:
        typer.echo("--nodes: 1 or 3 (two controllers cannot lose one and keep a quorum)", err=True)
        raise typer.Exit(2)
    try:
        run_foreground(
            nodes,
            workdir,
            lambda kafka: typer.echo(_ready_message(kafka)),
            host=host,
            port=port,
            secured=secured,
            hosts=hosts.split(",") if hosts else None,
            node_id=node_id,
            cluster_id=cluster_id,
            startup_timeout_s=startup_timeout,
        )
    except LocalKafkaError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc


def _ready_message(kafka: object) -> str:
    """Where the cluster listens, and the three ways to point the other commands at it."""
    from pricing_ha.local.broker import LocalKafka

    assert isinstance(kafka, LocalKafka)
    bootstrap = kafka.bootstrap
    nodes = "\n".join(
        f"  node {n.node_id} (rack {n.rack}): {n.bootstrap}, pid {n.pid}, {n.dir}"
        for n in kafka.local_nodes
    )
    return (
        f"Apache Kafka ready in {kafka.startup_s:.1f} s: {bootstrap}\n{nodes}\n"
        "Point the other commands at it with one of:\n"
        f"  export PRICING_HA_BOOTSTRAP={bootstrap}\n"
        f"  pricing-ha <command> --bootstrap {bootstrap}\n"
        f'  [broker] bootstrap_servers = "{bootstrap}"   (in the --config file)\n'
        + (
            "  export PRICING_HA__TOPICS__REPLICATION_FACTOR=3   (three replicas, min ISR 2)\n"
            if len(kafka.nodes) == 3
            else ""
        )
        + _secured_message(kafka)
        + "then, once: pricing-ha topics create"
    )


def _secured_message(kafka: object) -> str:
    """How a role's commands authenticate to a secured cluster (nothing for a plain one)."""
    from pricing_ha.local.broker import LocalKafka

    assert isinstance(kafka, LocalKafka)
    if kafka.secured is None:
        return ""
    s = kafka.secured
    users = ", ".join(sorted(s.passwords))
    lines = [
        f"Secured (SASL/SCRAM-SHA-512 over TLS): users {users}; each role runs as its own user:",
        '  [broker] auth = "scram"',
        '           sasl_username = "ROLE"',
        f'           sasl_password_file = "{s.password_file("ROLE")}"',
        f'           ssl_ca_file = "{s.ca_file}"',
        "(topics create as the topics or admin user)",
    ]
    return "\n".join(lines) + "\n"
