"""neli: Not-only Exclusive Leader Induction over Kafka, for asyncio.

Leadership is *induced* from a Kafka consumer group's partition assignment: every member of a
group subscribes to one topic of M partitions, and a member leads partition ``i`` while its
observations of ``i`` are fresher than a threshold T. A role (any key) is led by the leader of
partition ``murmur2(role) mod M``. See :class:`Neli`, :class:`NeliConfig` and
:mod:`neli._tracker` for the rules, :func:`trace_leadership` for OpenTelemetry traces of
every transition (``opentelemetry-api``, optional), and :class:`OwnerLookup` for who owns a key
now, read from the members' heartbeats by any process (not a member).

When leadership ends
--------------------
:meth:`Neli.leads` (and :meth:`Neli.is_leader`) answer from local clocks *now*. ``True`` means
the group assigns the partition to this member and its last observation of the partition is
fresher than T (fast variant: its own heartbeat came back within T; exclusive mode: also the
grace period T after the assignment has passed). The answer can stop being true unnoticed:

* **Exclusive mode**: at the latest T + e after the last fresh observation, which is before the
  broker's session timeout S lets another member be assigned (the config enforces
  T + e < S). This holds only if the process is not paused *between asking and acting*: a
  pause (GC, SIGSTOP, VM freeze) after a ``True`` lets an action land after a successor has
  started. Only fencing at the resource (for Kafka output, producer epochs through
  ``transactional.id``) closes that window; NELI alone cannot.
* **Non-exclusive mode**: another member may lead the same partition at the same time. T > S
  guarantees *at least one* leader per partition, never at most one: make the led work
  idempotent or deduplicate downstream.
* **Revocation**: REVOKED is delivered inside the rebalance, after :meth:`Neli.leads` already
  answers ``False``; the rebalance waits for barrier handlers (see :class:`BarrierHandler`).
  Its reason is ``"rebalance"`` for a planned revocation (the member is in the group) and
  ``"session lost"`` when the group may already have moved on without it. After a session
  loss the member rejoins without waiting for the handlers (nothing is protected by waiting:
  the next holder waits out its grace period); the events still arrive in order.
* **Ending a grace period early** (:meth:`Neli.end_grace`, exclusive mode): the grace period
  T after an assignment protects against a predecessor that has not noticed its loss yet. An
  application holding proof that no predecessor can still act (a release record the holder
  wrote after its last act, at the end of a log just read) may end it; the exclusivity
  guarantee then rests on that proof. The fast variant also ends it by itself on evidence:
  once the member's own first heartbeat has returned, if the previous holder's last heartbeat
  read before it was sent more than T + e ago (after a crash: about S plus the rebalance), and
  a holder that reads a later term of another member on its partition stops leading it (until
  the group disproves that take-over, 2 S + 1 s later: see :mod:`neli._tracker`). Both
  need wall clocks within e. :meth:`Neli.previous_holder_silent_s` tells an application how
  long ago that last heartbeat was sent, e.g. to wait until output the previous holder
  produced while it led has expired; :meth:`Neli.assigned_since` when the partition was
  assigned to this member (the ``since`` its heartbeats carry), e.g. to tell whether another
  member's act came after it. In fast exclusive mode a member commits the position of its own
  latest heartbeat on each partition, so the next holder always reads it.
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
from neli._owners import Owner, OwnerDirectory, OwnerLookup
from neli._roles import KAFKA_PARTITIONER, murmur2, role_index, role_partition
from neli._runtime import Neli
from neli._status import NeliStatus
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
    "NeliStatus",
    "Owner",
    "OwnerDirectory",
    "OwnerLookup",
    "SystemClock",
    "TaskFactory",
    "TopicError",
    "Variant",
    "murmur2",
    "role_index",
    "role_partition",
    "trace_leadership",
]
