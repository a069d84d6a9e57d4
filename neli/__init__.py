"""neli: Not-only Exclusive Leader Induction over Kafka, for asyncio.

Leadership is *induced* from a Kafka consumer group's partition assignment: every member of a
group subscribes to one topic of M partitions, and a member leads partition ``i`` while its
observations of ``i`` are fresher than a threshold T. A role (any key) is led by the leader of
partition ``murmur2(role) mod M``. See :class:`Neli` (one member), :class:`NeliConfig`, the
events (:class:`LeadershipEvent`, :class:`BarrierHandler`), :class:`LeaderTasks` (a task per
led partition), :func:`trace_leadership` for OpenTelemetry traces of every transition
(``opentelemetry-api``, optional), and :class:`OwnerLookup` for who owns a key now, read from
the members' heartbeats by any process (not a member).

Beyond the root:

* :mod:`neli.testing`: :class:`~neli.testing.FakeNeli` and a manual clock for users' tests.
* :mod:`neli.takeover`: the hand-over and early-grace hooks (``Neli.takeover``), for an
  application that moves state with a partition.
* :mod:`neli.partitioner`: the role hash, for producers that must agree with NELI.
* :mod:`neli.wire`: the heartbeat record, for code that reads the NELI topic itself.
* :mod:`neli.clock`: the time-source protocol a member is built on.

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
* **A grace period ended early** (exclusive mode): by the application, with proof that no
  predecessor can still act, or by the fast variant on evidence from heartbeats; the
  exclusivity guarantee then rests on that proof or evidence. See :mod:`neli.takeover`.
"""

from __future__ import annotations

from neli._config import Mode, NeliConfig, Variant
from neli._errors import (
    BrokerUnavailableError,
    NeliClosedError,
    NeliConfigError,
    NeliError,
    TopicError,
)
from neli._events import BarrierHandler, EventKind, LeadershipEvent
from neli._owners import Owner, OwnerLookup
from neli._runtime import Neli
from neli._status import NeliStatus
from neli._tasks import LeaderTasks, TaskFactory
from neli._telemetry import LeadershipTracing, trace_leadership

__all__ = [
    "BarrierHandler",
    "BrokerUnavailableError",
    "EventKind",
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
    "OwnerLookup",
    "TaskFactory",
    "TopicError",
    "Variant",
    "trace_leadership",
]
