"""The role table as Amazon MSK IAM permissions: what ``deploy/terraform/iam.tf`` must grant.

MSK's IAM access control names Kafka resources by ARN (``cluster/``, ``topic/``, ``group/``,
``transactional-id/`` under the cluster's name and id) and Kafka operations by
``kafka-cluster:`` actions. :func:`iam_grants` gives a role's ``(action, resource)`` pairs, the
resource written ``topic/<name>``, ``group/<id>``, ``transactional-id/<id>`` or ``cluster``
(a trailing ``*`` is a wildcard, as in the ARN). The Terraform builds its policies from its own
``local.services`` table; ``tests/unit/security/test_security_terraform.py`` evaluates those
policies and compares them with these pairs, role by role.

=======================  ===========================================================
the table says           MSK IAM actions
=======================  ===========================================================
every role               ``Connect``, ``DescribeCluster``; ``DescribeTopic`` and
                         ``DescribeTopicDynamicConfiguration`` on the six topics
``read``                 ``ReadData`` on the topic
``write``                ``WriteData`` on the topic; ``WriteDataIdempotently``
``groups``               ``AlterGroup``, ``DescribeGroup`` on the group
``transactional_ids``    ``AlterTransactionalId``, ``DescribeTransactionalId``
``create_topics``        ``CreateTopic``, ``AlterTopic``,
                         ``AlterTopicDynamicConfiguration`` on the six topics
=======================  ===========================================================
"""

from __future__ import annotations

from pricing_ha.config import AppConfig
from pricing_ha.security.roles import Role

__all__ = ["IamGrant", "iam_grants"]

IamGrant = tuple[str, str]
"""``(action, resource)``, e.g. ``("kafka-cluster:ReadData", "topic/md.quotes")``."""

_ACTION = "kafka-cluster:"


def _each(actions: tuple[str, ...], resources: list[str]) -> set[IamGrant]:
    return {(f"{_ACTION}{a}", r) for a in actions for r in resources}


def iam_grants(role: Role, cfg: AppConfig) -> set[IamGrant]:
    """Every ``(action, resource)`` pair ``role`` needs on MSK under ``cfg``'s names."""
    names = cfg.topics.by_role()
    every_topic = [f"topic/{t}" for t in names.values()]
    out = _each(("Connect", "DescribeCluster"), ["cluster"])
    out |= _each(("DescribeTopic", "DescribeTopicDynamicConfiguration"), every_topic)
    out |= _each(("ReadData",), [f"topic/{names[r]}" for r in role.read])
    out |= _each(("WriteData",), [f"topic/{names[w]}" for w in role.write])
    if role.idempotent:
        out |= _each(("WriteDataIdempotently",), ["cluster"])
    out |= _each(("AlterGroup", "DescribeGroup"), [f"group/{g}" for g in role.groups])
    out |= _each(
        ("AlterTransactionalId", "DescribeTransactionalId"),
        [f"transactional-id/{t}" for t in role.transactional_ids],
    )
    if role.create_topics:
        out |= _each(("CreateTopic", "AlterTopic", "AlterTopicDynamicConfiguration"), every_topic)
    return out
