"""The role table grants the group and transactional ids the code builds, and no more."""

from __future__ import annotations

import dataclasses
import inspect
from fnmatch import fnmatchcase
from pathlib import Path

from confluent_kafka.admin._acl import AclOperation
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from typer.testing import CliRunner

import pricing_ha.status
from pricing_ha.cli import app
from pricing_ha.config import AppConfig, GroupsConfig
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.relay_clients import raw_group_id, relay_group_id, standby_settings
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.publishing.publisher import neli_group_id
from pricing_ha.publishing.quote_worker import quotes_group_id
from pricing_ha.security import CLUSTER, acl_bindings, role_table
from pricing_ha.subscribing.subscriber import Subscriber


def _granted(names: tuple[str, ...], wanted: str) -> bool:
    return any(fnmatchcase(wanted, n) if n.endswith("*") else n == wanted for n in names)


def test_every_group_id_the_code_builds_is_granted_to_its_role() -> None:
    """NELI, quote, relay, raw, standby and subscriber group ids each match their role's grant."""
    cfg = AppConfig()
    table = role_table(cfg)
    for g in cfg.groups.publishing:
        assert _granted(table[g].groups, neli_group_id(g))
        assert _granted(table[g].groups, quotes_group_id(g))
    relay = table["relay"]
    assert _granted(relay.groups, relay_group_id(cfg.groups.relay))
    assert _granted(relay.groups, raw_group_id(cfg.groups.relay))
    assert _granted(relay.groups, str(standby_settings(cfg, "m1")["group.id"]))
    assert _granted(table["subscriber"].groups, Subscriber(cfg).group_id)
    status = inspect.getsource(pricing_ha.status)  # its reader's group id is a literal
    assert all(f'"group.id": "{g}"' in status for g in table["status"].groups)


def test_the_relays_transactional_ids_are_granted_and_follow_the_prices_topic() -> None:
    """Each output fence's transactional.id is in the relay's prefix, also for renamed topics."""
    for prices in ("prices", "fx.prices"):
        cfg = AppConfig(topics=dataclasses.replace(AppConfig().topics, prices=prices))
        out = OutputProducers(
            cfg, "r1", raw_group_id(cfg.groups.relay), stats=RelayStats(), producer_factory=None
        )
        tids = {out.fences.transactional_id(p) for p in range(cfg.topics.partitions)}
        granted = role_table(cfg)["relay"].transactional_ids
        assert all(_granted(granted, t) for t in tids), (tids, granted)
        others = [r for r in role_table(cfg).values() if r.name != "relay"]
        assert all(not r.transactional_ids for r in others)


def test_no_role_but_the_relay_writes_prices_and_no_subscriber_writes_at_all() -> None:
    """prices is the relay's (and the operator's reset records'); subscribers and the pipeline
    only read; publishers never join another group's groups."""
    table = role_table(AppConfig())
    assert [r.name for r in table.values() if "prices" in r.write] == ["relay", "operator"]
    assert table["operator"].read == ()
    assert table["operator"].groups == ()
    for reader in ("subscriber", "pipeline", "status"):
        assert table[reader].write == ()
        assert not any(g.startswith("pricing.") for g in table[reader].groups)
    assert not set(table["p1"].groups) & set(table["p2"].groups)
    assert "raw" not in table["relay"].write


def test_one_role_per_publishing_group() -> None:
    """Three publishing groups make three publisher roles, each with its own groups."""
    cfg = AppConfig(groups=GroupsConfig(publishing=("a", "b", "c")))
    table = role_table(cfg)
    assert {"a", "b", "c"} <= set(table)
    assert table["c"].groups == ("pricing.c", "pricing.c.quotes")


def test_acl_bindings_of_the_relay() -> None:
    """The relay's ACLs: prefixed standby group and transactional ids, idempotent write, no
    write on prices.raw."""
    cfg = AppConfig()
    bindings = acl_bindings(role_table(cfg)["relay"], cfg)
    assert {b.principal for b in bindings} == {"User:relay"}
    by = {(b.restype, b.name, b.resource_pattern_type, b.operation) for b in bindings}
    assert (
        ResourceType.GROUP,
        "relay-standby-",
        ResourcePatternType.PREFIXED,
        AclOperation.READ,
    ) in by
    assert (
        ResourceType.TRANSACTIONAL_ID,
        "pricing.relay.raw.prices.",
        ResourcePatternType.PREFIXED,
        AclOperation.WRITE,
    ) in by
    assert (
        ResourceType.BROKER,
        CLUSTER,
        ResourcePatternType.LITERAL,
        AclOperation.IDEMPOTENT_WRITE,
    ) in by
    writes = {b.name for b in bindings if b.operation == AclOperation.WRITE}
    assert writes == {"pricing.neli", "prices", "prices.raw.dlq", "pricing.relay.raw.prices."}


def test_a_subscriber_has_no_write_and_no_group_beyond_its_own() -> None:
    """The subscriber's bindings: read/describe only, its own group prefix, nothing else."""
    cfg = AppConfig()
    bindings = acl_bindings(role_table(cfg)["subscriber"], cfg)
    ops = {b.operation for b in bindings}
    assert ops == {AclOperation.DESCRIBE, AclOperation.READ}
    groups = {b.name for b in bindings if b.restype == ResourceType.GROUP}
    assert groups == {"pricing-ha-subscriber-"}


def test_acls_command_prints_every_binding_of_the_configured_names(tmp_path: Path) -> None:
    """`pricing-ha acls` prints one line per binding, under the configuration's topic names."""
    config = tmp_path / "c.toml"
    config.write_text('[topics]\nprices = "fx.prices"\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["acls", "--config", str(config)], env={})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    cfg = AppConfig(topics=dataclasses.replace(AppConfig().topics, prices="fx.prices"))
    assert len(lines) == sum(len(acl_bindings(r, cfg)) for r in role_table(cfg).values())
    assert "ALLOW User:relay WRITE TOPIC fx.prices (LITERAL)" in lines
    assert (
        "ALLOW User:relay WRITE TRANSACTIONAL_ID pricing.relay.raw.fx.prices. (PREFIXED)" in lines
    )
    assert not any(line.startswith("ALLOW User:subscriber WRITE") for line in lines)
