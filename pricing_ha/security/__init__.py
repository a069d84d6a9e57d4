"""Roles the broker enforces: one table of principals and their rights, and what it grants.

:mod:`.roles` holds the table (every role's topics, groups and transactional ids), :mod:`.acls`
the Kafka ACLs made from it (the local secured broker) and :mod:`.iam` the Amazon MSK IAM
actions (``deploy/terraform`` grants them; a test compares). docs/threat-model.md is the
reference.
"""

from __future__ import annotations

from pricing_ha.security.acls import CLUSTER, acl_bindings, create_acls, principal
from pricing_ha.security.iam import IamGrant, iam_grants
from pricing_ha.security.roles import PREFIX, Role, is_prefix, role_table, transactional_id_prefix

__all__ = [
    "CLUSTER",
    "PREFIX",
    "IamGrant",
    "Role",
    "acl_bindings",
    "create_acls",
    "iam_grants",
    "is_prefix",
    "principal",
    "role_table",
    "transactional_id_prefix",
]
