"""Roles the broker enforces: one table of principals and their rights, and its Kafka ACLs.

:mod:`.roles` holds the table (every role's topics, groups and transactional ids) and
:mod:`.acls` the Kafka ACLs made from it; ``deploy/terraform`` grants the same rights as IAM
policies. docs/threat-model.md is the reference.
"""

from __future__ import annotations

from pricing_ha.security.acls import CLUSTER, acl_bindings, create_acls, principal
from pricing_ha.security.roles import PREFIX, Role, is_prefix, role_table, transactional_id_prefix

__all__ = [
    "CLUSTER",
    "PREFIX",
    "Role",
    "acl_bindings",
    "create_acls",
    "is_prefix",
    "principal",
    "role_table",
    "transactional_id_prefix",
]
