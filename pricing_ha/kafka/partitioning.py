"""Which partition an instrument lives on: Kafka's default (Java) partitioner, murmur2.

docs/architecture.md ("Topics and partitioning") puts an instrument on
``toPositive(murmur2(utf8(symbol))) mod M`` of every keyed topic, so that leading NELI partition k
means owning slice k end to end. librdkafka's own default is a different hash
(``consistent_random``, CRC32), so every producer of keyed data in pricing-ha sets
:data:`KEYED_PRODUCER_SETTINGS` (``partitioner=murmur2_random``: murmur2 for keyed messages,
exactly Java's choice). The hash itself is NELI's role hash
(:func:`neli.partitioner.role_partition`): an instrument *is* a NELI role.
"""

from __future__ import annotations

from neli.partitioner import KAFKA_PARTITIONER, murmur2, role_partition

__all__ = ["KEYED_PRODUCER_SETTINGS", "instrument_partition", "murmur2"]

KEYED_PRODUCER_SETTINGS: dict[str, str | int | float | bool] = {"partitioner": KAFKA_PARTITIONER}
"""Producer settings that make librdkafka place keyed messages as Kafka's Java client does."""


def instrument_partition(symbol: str, partitions: int) -> int:
    """The partition of ``symbol`` on every keyed topic with ``partitions`` partitions."""
    return role_partition(symbol, partitions)
