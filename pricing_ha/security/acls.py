"""Kafka ACLs from the role table: what the local secured broker enforces for each principal.

:func:`acl_bindings` turns a :class:`~pricing_ha.security.roles.Role` into ``ALLOW`` bindings
for ``User:<role>``; :func:`create_acls` gives a cluster every role's bindings through an
admin client (``AdminClient.create_acls``). With ``allow.everyone.if.no.acl.found=false``
(:mod:`pricing_ha.local.kafka_node`), anything not bound here is refused.

===========================  =======================================================
the table says               the ACLs
===========================  =======================================================
every role                   ``DESCRIBE`` each of the six topics (the layout check)
``read``                     ``READ`` the topic
``write``                    ``WRITE`` the topic; ``IDEMPOTENT_WRITE`` on the cluster
``groups``                   ``READ`` the group (join, commit, fetch offsets)
``transactional_ids``        ``WRITE`` and ``DESCRIBE`` the transactional id
``create_topics``            ``CREATE``, ``ALTER_CONFIGS``, ``DESCRIBE_CONFIGS`` the topics
===========================  =======================================================

A name ending in ``*`` becomes a ``PREFIXED`` pattern, any other a ``LITERAL`` one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# The defining modules: confluent_kafka.admin re-exports these without marking them public.
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from pricing_ha.config import AppConfig
from pricing_ha.security.roles import PREFIX, Role, is_prefix, role_table

__all__ = ["CLUSTER", "acl_bindings", "create_acls", "describe", "principal"]

#: The one cluster resource's name in Kafka ACLs.
CLUSTER = "kafka-cluster"
_CREATE_OPS = (AclOperation.CREATE, AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS)


def principal(role: Role) -> str:
    """The Kafka principal of ``role``: ``User:<role name>`` (its SCRAM user name)."""
    return f"User:{role.name}"


def _binding(role: Role, rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
    pattern = ResourcePatternType.PREFIXED if is_prefix(name) else ResourcePatternType.LITERAL
    return AclBinding(
        rtype,
        name.removesuffix(PREFIX),
        pattern,
        principal(role),
        "*",
        op,
        AclPermissionType.ALLOW,
    )


def acl_bindings(role: Role, cfg: AppConfig) -> list[AclBinding]:
    """Every ``ALLOW`` binding of ``role`` under ``cfg``'s topic names (and nothing else)."""
    topics = cfg.topics.by_role()
    out = [_binding(role, ResourceType.TOPIC, t, AclOperation.DESCRIBE) for t in topics.values()]
    out += [_binding(role, ResourceType.TOPIC, topics[r], AclOperation.READ) for r in role.read]
    out += [_binding(role, ResourceType.TOPIC, topics[r], AclOperation.WRITE) for r in role.write]
    if role.idempotent:
        out.append(_binding(role, ResourceType.BROKER, CLUSTER, AclOperation.IDEMPOTENT_WRITE))
    out += [_binding(role, ResourceType.GROUP, g, AclOperation.READ) for g in role.groups]
    for tid in role.transactional_ids:
        out.append(_binding(role, ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE))
        out.append(_binding(role, ResourceType.TRANSACTIONAL_ID, tid, AclOperation.DESCRIBE))
    if role.create_topics:
        out += [
            _binding(role, ResourceType.TOPIC, t, op) for t in topics.values() for op in _CREATE_OPS
        ]
    return out


def _name(value: object) -> str:
    name = getattr(value, "name", None)
    return str(value) if name is None else str(name)


def describe(binding: AclBinding) -> str:
    """One line for a binding: ``ALLOW User:relay WRITE TOPIC prices (LITERAL)``."""
    rtype = "CLUSTER" if binding.restype == ResourceType.BROKER else _name(binding.restype)
    return (
        f"{_name(binding.permission_type)} {binding.principal} {_name(binding.operation)}"
        f" {rtype} {binding.name} ({_name(binding.resource_pattern_type)})"
    )


def create_acls(
    admin: Any, cfg: AppConfig, *, roles: Iterable[Role] | None = None, timeout_s: float = 30.0
) -> int:
    """Create every binding of ``roles`` (default: the whole table) on the cluster.

    Args:
        admin: a confluent-kafka ``AdminClient`` of a principal allowed to alter ACLs.
        cfg: the configuration whose topic and group names the bindings use.
        roles: the roles to grant; default :func:`~pricing_ha.security.roles.role_table`.
        timeout_s: bound on the request.

    Returns:
        How many bindings were created (creating an existing one again is no error).

    Raises:
        KafkaException: the broker refused a binding (the first such error).
    """
    chosen = list(role_table(cfg).values() if roles is None else roles)
    bindings = [b for role in chosen for b in acl_bindings(role, cfg)]
    futures = admin.create_acls(bindings, request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout=timeout_s)
    return len(bindings)
