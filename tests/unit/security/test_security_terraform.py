"""deploy/terraform grants each task role exactly what the role table says (transactional ids too).

The Kafka policy of ``iam.tf`` is evaluated here, per task role, from the parsed HCL: each
statement's condition (``for_each``) and resource expression is one of a few known forms, read
against the role's entry in ``local.services`` (or ``local.topics_task``), and the result, a set
of ``(action, resource)`` pairs, is compared with :func:`pricing_ha.security.iam.iam_grants` of
the table's role. A statement of an unknown form fails the test: extend the evaluator with it.
"""

from __future__ import annotations

import re
from typing import Any

from pricing_ha.config import AppConfig
from pricing_ha.security import role_table
from pricing_ha.security.iam import IamGrant, iam_grants
from tests.unit.project.test_deploy_terraform import _root_local, root_services
from tests.unit.project.test_deploy_tools import blocks, resources, top_level, v

#: Terraform task role -> the table's role.
TASK_ROLE = {
    "p1": "p1",
    "p2": "p2",
    "relay_a": "relay",
    "relay_b": "relay",
    "feed": "feed",
    "topics": "topics",
}
_TOPICS = AppConfig().topics.by_role()


def _task_roles() -> dict[str, dict[str, Any]]:
    """``local.task_roles``: the services plus the topics task."""
    roles = dict(root_services())
    roles["topics"] = _root_local("topics_task")
    return roles


def _interpolate(text: str) -> str:
    """A name from the HCL with the default topic names put in (``${local.topics.prices}``)."""
    return re.sub(r"\$\{local\.topics\.(\w+)\}", lambda m: _TOPICS[m[1]], text)


def _enabled(condition: str, role: dict[str, Any]) -> bool:
    """A dynamic statement's ``for_each`` (``cond ? [1] : []``) for one role."""
    if m := re.fullmatch(r"\$\{length\(each\.value\.(\w+)\) > 0 \? \[1\] : \[\]\}", condition):
        return len(role[m[1]]) > 0
    if m := re.fullmatch(r"\$\{each\.value\.(\w+) \? \[1\] : \[\]\}", condition):
        return bool(role[m[1]])
    raise AssertionError(f"unknown statement condition {condition!r}")


def _resources(expr: Any, role: dict[str, Any]) -> list[str]:
    """A statement's resources as ``topic/x``, ``group/x``, ``transactional-id/x``, ``cluster``."""
    if expr == ["${local.cluster_arn}"]:
        return ["cluster"]
    every = '${[for t in values(local.topics) : "${local.topic_arn_prefix}${t}"]}'
    if expr == every:
        return [f"topic/{t}" for t in _TOPICS.values()]
    m = re.fullmatch(
        r'\$\{\[for (\w) in each\.value\.(\w+) : "\$\{local\.(\w+)_arn_prefix\}\$\{(.+?)\}"\]\}',
        str(expr),
    )
    assert m, f"unknown resource expression {expr!r}"
    var, field, kind, inner = m.groups()
    names = [_interpolate(n) for n in role[field]]
    if kind == "topic":
        assert inner == f"local.topics[{var}]", expr
        return [f"topic/{_TOPICS[n]}" for n in names]
    assert inner == var, expr
    return [f"{kind.replace('_', '-')}/{n}" for n in names]


def _terraform_grants(role: dict[str, Any]) -> set[IamGrant]:
    """The ``(action, resource)`` pairs ``iam.tf``'s Kafka policy gives one task role."""
    doc = resources("data.aws_iam_policy_document")[".:task_kafka"]
    statements = list(blocks(doc, "statement"))
    for dyn in blocks(doc, "dynamic"):
        body = dyn["statement"]
        if _enabled(v(body, "for_each"), role):
            statements.append(body["content"][0])
    out: set[IamGrant] = set()
    for st in statements:
        for action in v(st, "actions"):
            out |= {(action, r) for r in _resources(v(st, "resources"), role)}
    return out


def test_every_task_role_is_a_role_of_the_table() -> None:
    """Each Terraform task role maps to a role of the table (and the mapping covers them all)."""
    assert set(_task_roles()) == set(TASK_ROLE)
    assert set(TASK_ROLE.values()) <= set(role_table(AppConfig()))


def test_terraform_grants_exactly_the_table_per_role() -> None:
    """For each task role, iam.tf's actions and resources equal those the table derives."""
    table = role_table(AppConfig())
    for name, entry in _task_roles().items():
        expected = iam_grants(table[TASK_ROLE[name]], AppConfig())
        got = _terraform_grants(entry)
        assert got == expected, (
            f"{name}: missing {sorted(expected - got)}; extra {sorted(got - expected)}"
        )


def test_the_relay_may_fence_with_its_transactional_ids() -> None:
    """The relay's task roles may alter and describe its transactional ids (fencing needs both)."""
    for name in ("relay_a", "relay_b"):
        grants = _terraform_grants(_task_roles()[name])
        tids = {r for a, r in grants if a == "kafka-cluster:AlterTransactionalId"}
        assert tids == {"transactional-id/pricing.relay.raw.prices.*"}
    arn = _root_local("transactional_id_arn_prefix")
    assert '":cluster/", ":transactional-id/"' in arn


def test_msk_requires_two_in_sync_replicas_and_survives_an_az() -> None:
    """MSK: min.insync.replicas = 2, and the default RF and broker count keep two replicas in
    each AZ, so acks=all goes on when one AZ is lost."""
    config = resources("aws_msk_configuration", "modules/msk")["modules/msk:this"]
    properties = v(config, "server_properties")
    assert re.search(r"^\s*min\.insync\.replicas=2\s*$", properties, re.MULTILINE), properties
    variables = top_level("variable")
    rf = v(variables["replication_factor"], "default")
    brokers = v(variables["broker_count"], "default")
    assert rf == 4
    assert brokers >= rf
    assert rf // 2 >= 2  # replicas left in sync when one of the two AZs (half of them) is gone
    check = blocks(blocks(config, "lifecycle")[0], "precondition")[0]
    assert "var.replication_factor >= 3" in v(check, "condition")
    assert "var.replication_factor <= var.broker_count" in v(check, "condition")
