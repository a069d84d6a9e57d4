"""``pricing-ha acls``: the Kafka ACLs of the role table, printed or applied."""

from __future__ import annotations

from typing import Annotated

import typer

from pricing_ha.cli._app import app
from pricing_ha.cli._support import (
    BootstrapOption,
    ConfigOption,
    VerboseOption,
    guarded,
    load_cli_config,
    quiet_connection_log,
)

__all__ = ["acls_command"]


@app.command("acls")
def acls_command(
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    apply: Annotated[
        bool,
        typer.Option(
            help="Create them on the cluster (as the configured user, who must be allowed to"
            " alter ACLs); without it, only print them."
        ),
    ] = False,
    verbose: VerboseOption = False,
) -> None:
    """The ACLs each role needs (pricing_ha/security/roles.py), for a SASL cluster of your own."""
    from confluent_kafka import KafkaException

    from pricing_ha.kafka.topics import fetch_metadata, make_admin
    from pricing_ha.security import acl_bindings, create_acls, role_table
    from pricing_ha.security.acls import describe

    quiet_connection_log(verbose)
    with guarded():
        cfg = load_cli_config(config, bootstrap)
        roles = role_table(cfg)
        if not apply:
            for role in roles.values():
                for binding in acl_bindings(role, cfg):
                    typer.echo(describe(binding))
            return
        admin = make_admin(cfg)
        broker = cfg.broker
        fetch_metadata(admin, broker.bootstrap_servers, broker.connect_timeout_ms / 1000)
        try:
            count = create_acls(admin, cfg, timeout_s=broker.connect_timeout_ms / 1000)
        except KafkaException as exc:
            typer.echo(f"error: the broker refused the ACLs: {exc.args[0].str()}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"ok: {count} ACLs for {len(roles)} roles ({', '.join(roles)})")
