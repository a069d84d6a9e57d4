"""A relay member's Kafka clients: its consumer groups, and how its consumers are built.

A member of relay group ``g`` belongs to two consumer groups: NELI's (:func:`relay_group_id`,
``pricing.relay`` by default), which decides which member leads which partition, and the group
that holds its committed ``prices.raw`` positions (:func:`raw_group_id`), which it only commits
to (partitions are assigned by hand).

Its clients are built from :meth:`~pricing_ha.config.BrokerConfig.client_config` settings: the
``prices.raw`` consumer (:meth:`RelayClients.raw_consumer`), the standby tail's reader of
``prices`` (:func:`standby_settings`; :mod:`.standby`) and its producers to ``prices``
(:mod:`.output_producers`). :class:`RelayClients` says how each is made from its settings: the
relay simulation (``tests/sim``) passes fakes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.raw_input import FETCH_SETTINGS
from pricing_ha.kafka.lookups import LookupConsumer

__all__ = [
    "RelayClients",
    "kafka_consumer",
    "raw_group_id",
    "relay_group_id",
    "standby_settings",
]

log = logging.getLogger("pricing_ha.relay")


def relay_group_id(group: str) -> str:
    """The NELI consumer group of relay group ``group`` (``pricing.relay`` by default)."""
    return f"pricing.{group}"


def raw_group_id(group: str) -> str:
    """The consumer group holding relay group ``group``'s committed ``prices.raw`` positions."""
    return f"pricing.{group}.raw"


def kafka_consumer(settings: dict[str, Any]) -> Consumer:
    """A real consumer (what a relay member uses outside the simulation), whose look-ups of
    committed offsets survive a wedged coordinator connection (:mod:`pricing_ha.kafka.lookups`)."""
    return LookupConsumer(settings, logger=log)


@dataclass(frozen=True)
class RelayClients:
    """How a relay worker builds its Kafka clients (the simulation passes fakes).

    Attributes:
        consumer: the ``prices.raw`` consumer, from its settings.
        producer: the ``prices`` producer (a replacement too), from its settings.
        reader: the standby tail's consumer of ``prices``, from its settings.
    """

    consumer: Callable[[dict[str, Any]], Consumer]
    producer: Callable[[dict[str, Any]], Producer] | None = None
    reader: Callable[[dict[str, Any]], Any] | None = None

    def raw_consumer(
        self,
        cfg: AppConfig,
        group: str,
        member: str,
        extra: Mapping[str, Any] | None = None,
    ) -> Consumer:
        """The member's ``prices.raw`` consumer: partitions assigned by hand, offsets committed
        by hand to :func:`raw_group_id`, read from the start where nothing was committed.
        ``extra`` settings (e.g. librdkafka statistics) come on top."""
        return self.consumer(
            cfg.broker.client_config(
                defaults=dict(FETCH_SETTINGS),
                required={
                    "group.id": raw_group_id(group),
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                    "client.id": f"relay-{member}-raw",
                },
            )
            | dict(extra or {}),
        )


def standby_settings(cfg: AppConfig, member: str) -> dict[str, Any]:
    """The settings of the member's standby reader of ``prices`` (a throwaway group id;
    nothing is committed)."""
    return cfg.broker.client_config(
        defaults=dict(FETCH_SETTINGS),
        required={
            "group.id": f"relay-standby-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "client.id": f"relay-{member}-standby",
        },
    )
