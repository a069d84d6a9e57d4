"""Who may do what on the broker: one table of roles, from which every grant is derived.

Each process of a deployment runs as one principal with the rights of its :class:`Role` and no
others. The table (:func:`role_table`) is the single source: :mod:`.acls` turns it into Kafka
ACLs for the local broker (SASL/SCRAM over TLS, ``StandardAuthorizer``), and
``deploy/terraform`` names the same rights in its IAM policies (``local.services`` in
``main.tf``; ``tests/unit/security/test_security_terraform.py`` compares the two).
docs/threat-model.md says what the grants enforce and what they cannot.

Every role may connect and describe the six topics (each command checks the topic layout
first). Beyond that:

==============  ==================  ==========================  ==================================
role            reads               writes                      groups / transactional ids
==============  ==================  ==========================  ==================================
``feed``        --                  quotes                      --
``p1``, ``p2``  quotes, neli        neli, raw, dlq              ``pricing.<g>``,
                                                                ``pricing.<g>.quotes``
``relay``       raw, neli, prices   neli, prices, raw_dlq       ``pricing.relay``,
                                                                ``pricing.relay.raw``,
                                                                ``relay-standby-*``; txn
                                                                ``pricing.relay.raw.prices.*``
``subscriber``  prices, raw         --                          ``pricing-ha-subscriber-*``
``pipeline``    quotes, raw,        --                          ``spark-kafka-*``
                prices
``status``      neli                --                          ``pricing-ha-status``
``operator``    --                  prices (reset records)      --
``topics``      --                  --                          creates the six topics
==============  ==================  ==========================  ==================================

A name ending in ``*`` is a prefix (a Kafka ``PREFIXED`` pattern; an IAM ARN wildcard). The
group ids and transactional ids are the ones the code builds (``neli_group_id``,
``quotes_group_id``, ``relay_group_id``, ``raw_group_id``, the relay's standby reader and
output fences, the subscriber); ``tests/unit/security/test_security_roles.py`` builds each and
checks it is granted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pricing_ha.config import AppConfig

__all__ = [
    "PREFIX",
    "Role",
    "is_prefix",
    "role_table",
    "transactional_id_prefix",
]

#: The last character of a name that stands for every name beginning with the rest.
PREFIX = "*"


def is_prefix(name: str) -> bool:
    """Whether a group or transactional id in the table is a prefix (``relay-standby-*``)."""
    return name.endswith(PREFIX)


def transactional_id_prefix(cfg: AppConfig, group: str) -> str:
    """The prefix of relay group ``group``'s transactional ids (``{prefix}{partition}``)."""
    return f"pricing.{group}.raw.{cfg.topics.prices}."


@dataclass(frozen=True, kw_only=True, slots=True)
class Role:
    """The rights of one principal.

    Attributes:
        name: the role, and the principal's user name on the local broker.
        what: who runs as this role.
        read: topic roles (keys of :meth:`~pricing_ha.config.TopicsConfig.by_role`) it consumes.
        write: topic roles it produces to (idempotently: every producer here is idempotent).
        groups: consumer group ids it joins, commits to or uses; ``*``-suffixed: a prefix.
        transactional_ids: transactional ids it initialises and writes with; a prefix likewise.
        create_topics: whether it creates (and configures) the six topics.
    """

    name: str
    what: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    create_topics: bool = False

    @property
    def idempotent(self) -> bool:
        """Whether the role writes (every pricing-ha producer is idempotent)."""
        return bool(self.write)


def role_table(cfg: AppConfig) -> Mapping[str, Role]:
    """Every role of a deployment configured by ``cfg``, by name (one per publishing group).

    The names of groups and transactional ids follow ``cfg.groups`` and ``cfg.topics``.
    """
    relay = cfg.groups.relay
    roles = [Role(name="feed", what="pricing-ha feed: market data in", write=("quotes",))]
    roles += [
        Role(
            name=g,
            what=f"pricing-ha run --group {g}: members of publishing group {g}",
            read=("quotes", "neli"),
            write=("neli", "raw", "dlq"),
            groups=(f"pricing.{g}", f"pricing.{g}.quotes"),
        )
        for g in cfg.groups.publishing
    ]
    roles += [
        Role(
            name="relay",
            what=f"pricing-ha dedupe --group {relay}: the relay's members",
            # The relay rebuilds its marks from prices, and its standby tails prices.
            read=("raw", "neli", "prices"),
            write=("neli", "prices", "raw_dlq"),
            groups=(f"pricing.{relay}", f"pricing.{relay}.raw", f"relay-standby-{PREFIX}"),
            transactional_ids=(f"{transactional_id_prefix(cfg, relay)}{PREFIX}",),
        ),
        Role(
            name="subscriber",
            what="pricing-ha subscribe and the subscriber library (direct mode reads raw)",
            read=("prices", "raw"),
            groups=(f"pricing-ha-subscriber-{PREFIX}",),
        ),
        Role(
            name="pipeline",
            what="pricing-ha pipeline: Spark reads the topics it reports on",
            read=("quotes", "raw", "prices"),
            # Spark's kafka source names its consumers spark-kafka-source-* (streams) and
            # spark-kafka-relation-* (batch); it assigns partitions and commits nothing.
            groups=(f"spark-kafka-{PREFIX}",),
        ),
        Role(
            name="status",
            what="pricing-ha status: an operator reads who leads what from the NELI topic",
            read=("neli",),
            groups=("pricing-ha-status",),  # named by its reader, which assigns and commits nothing
        ),
        Role(
            name="operator",
            what="pricing-ha reset-mark: an operator's reset control record on prices",
            # The only writer of prices besides the relay: a reset names one instrument and is
            # logged and traced by every relay that folds it (docs/threat-model.md).
            write=("prices",),
        ),
        Role(
            name="topics",
            what="pricing-ha topics create: the one-shot task that makes the topics",
            create_topics=True,
        ),
    ]
    return {r.name: r for r in roles}
