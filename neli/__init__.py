"""neli: Not-only Exclusive Leader Induction over Kafka, for asyncio.

Leadership is *induced* from a Kafka consumer group's partition assignment: every member of a
group subscribes to one topic of M partitions, and a member leads partition ``i`` while its
observations of ``i`` are fresher than a threshold T. A role (any key) is led by the leader of
partition ``murmur2(role) mod M``. See :class:`Neli`, :class:`NeliConfig` and
:mod:`neli._tracker` for exactly when leadership can no longer be trusted, and
:func:`trace_leadership` for OpenTelemetry traces of every transition (``opentelemetry-api``,
optional).
"""

from __future__ import annotations

from neli._clock import SYSTEM_CLOCK, Clock, SystemClock
from neli._config import Mode, NeliConfig, Variant
from neli._errors import (
    BrokerUnavailableError,
    NeliClosedError,
    NeliConfigError,
    NeliError,
    TopicError,
)
from neli._events import BarrierHandler, EventKind, LeadershipEvent
from neli._heartbeat import Heartbeat, HeartbeatDecodeError
from neli._roles import KAFKA_PARTITIONER, murmur2, role_index, role_partition
from neli._runtime import Neli
from neli._tasks import LeaderTasks, TaskFactory
from neli._telemetry import LeadershipTracing, trace_leadership

__all__ = [
    "KAFKA_PARTITIONER",
    "SYSTEM_CLOCK",
    "BarrierHandler",
    "BrokerUnavailableError",
    "Clock",
    "EventKind",
    "Heartbeat",
    "HeartbeatDecodeError",
    "LeaderTasks",
    "LeadershipEvent",
    "LeadershipTracing",
    "Mode",
    "Neli",
    "NeliClosedError",
    "NeliConfig",
    "NeliConfigError",
    "NeliError",
    "SystemClock",
    "TaskFactory",
    "TopicError",
    "Variant",
    "murmur2",
    "role_index",
    "role_partition",
    "trace_leadership",
]
