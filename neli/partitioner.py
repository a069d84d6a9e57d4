"""Which NELI partition leads a role, and how a Kafka producer agrees with it.

A role (any key: an instrument symbol, say) is led by the leader of partition
``role_partition(role, M)``: Kafka's murmur2 of the key made positive (:func:`role_index`),
mod M. :meth:`neli.Neli.partition_for` and :meth:`neli.Neli.is_leader` use it; this module is
for an application that keys its own topics the same way, so that a record for a role lands on
the partition its leader owns: librdkafka producers set ``partitioner`` to
:data:`KAFKA_PARTITIONER` (librdkafka's own default, ``consistent_random``, disagrees).
"""

from __future__ import annotations

from neli._roles import KAFKA_PARTITIONER, murmur2, role_index, role_partition

__all__ = ["KAFKA_PARTITIONER", "murmur2", "role_index", "role_partition"]
