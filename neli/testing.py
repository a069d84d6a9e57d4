"""Test helpers for code built on ``neli`` (goNELI's MockNeli, done the Python way).

:class:`FakeNeli` has the query and event surface of :class:`neli.Neli` but no Kafka: a test
decides who leads what by calling :meth:`FakeNeli.acquire`, :meth:`FakeNeli.revoke`,
:meth:`FakeNeli.fence` and :meth:`FakeNeli.resume`; each call delivers the event to the barrier
handlers (awaiting them, as the real member does) and to :meth:`FakeNeli.events` subscribers.
:attr:`FakeNeli.takeover` (a :class:`FakeTakeover`) answers the :mod:`neli.takeover` hooks
from what the test sets. :class:`ManualClock` is a :class:`neli.clock.Clock` that moves only
when told to.

Example::

    fake = FakeNeli(partitions=4)
    tasks = LeaderTasks(fake, run_partition)
    await fake.acquire(2)
    assert fake.is_leader(role_in_partition_2)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from neli._dispatch import EventBus
from neli._events import BarrierHandler, EventKind, LeadershipEvent
from neli._roles import role_partition
from neli._status import NeliStatus

__all__ = ["FakeNeli", "FakeTakeover", "ManualClock"]


class ManualClock:
    """A clock for tests: starts at the given times and advances only via :meth:`advance`."""

    def __init__(self, mono: float = 1000.0, wall: float = 1_700_000_000.0) -> None:
        """Start at monotonic ``mono`` and wall ``wall`` seconds."""
        self.mono = mono
        self.wall_s = wall

    def monotonic(self) -> float:
        """The current monotonic time."""
        return self.mono

    def wall(self) -> float:
        """The current wall time."""
        return self.wall_s

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``."""
        self.mono += seconds
        self.wall_s += seconds


class FakeTakeover:
    """The :class:`neli.takeover.Takeover` hooks of a :class:`FakeNeli`: each answers what the
    test put in the matching attribute."""

    def __init__(self) -> None:
        """No grace periods, no stall, nothing known."""
        #: Partitions in their grace period (set by the test; see :meth:`in_grace`).
        self.grace: set[int] = set()
        #: Partitions whose grace :meth:`end_grace` ended, in order.
        self.grace_ended: list[int] = []
        #: What :meth:`recovering` answers (set by the test to act out a stall).
        self.stalled = False
        #: What :meth:`previous_holder_silent_s` answers per partition (set by the test).
        self.silent: dict[int, float] = {}
        #: What :meth:`assigned_since` answers per partition (set by the test).
        self.since: dict[int, float] = {}

    def in_grace(self) -> frozenset[int]:
        """Partitions the test put in :attr:`grace` (assigned, in their grace period)."""
        return frozenset(self.grace)

    def end_grace(self, partition: int) -> bool:
        """Take ``partition`` out of :attr:`grace`; recorded in :attr:`grace_ended`."""
        if partition not in self.grace:
            return False
        self.grace.discard(partition)
        self.grace_ended.append(partition)
        return True

    def recovering(self) -> bool:
        """Whether a stall holds the fake off (:attr:`stalled`, set by the test)."""
        return self.stalled

    def previous_holder_silent_s(self, partition: int) -> float | None:
        """What the test put in :attr:`silent` for ``partition`` (else unknown)."""
        return self.silent.get(partition)

    def assigned_since(self, partition: int) -> float | None:
        """What the test put in :attr:`since` for ``partition`` (else unknown)."""
        return self.since.get(partition)


class FakeNeli:
    """An in-memory stand-in for :class:`neli.Neli`.

    Args:
        partitions: M.
        group_id: reported in events.
        member_name: reported in events.
    """

    def __init__(
        self, partitions: int = 1, *, group_id: str = "fake", member_name: str = "fake"
    ) -> None:
        """Create a member that leads nothing."""
        self._partitions = partitions
        self.group_id = group_id
        self.member_name = member_name
        self.member_id = f"{member_name}/fake"
        self._assigned: set[int] = set()
        self._led: set[int] = set()
        self._bus = EventBus()
        self._meta: list[Callable[[], Mapping[str, Any]]] = []
        self._clock = ManualClock()
        #: Every event delivered so far, in order.
        self.history: list[LeadershipEvent] = []
        #: What :attr:`heartbeats_rejected` answers (set by the test).
        self.rejected: dict[str, int] = {}
        self._takeover = FakeTakeover()

    # -- the Neli surface ---------------------------------------------------------------------

    @property
    def heartbeats_rejected(self) -> Mapping[str, int]:
        """Refused heartbeats per reason: :attr:`rejected`, set by the test."""
        return dict(self.rejected)

    @property
    def partitions(self) -> int:
        """M."""
        return self._partitions

    def partition_for(self, role: str | bytes) -> int:
        """The partition of ``role``."""
        return role_partition(role, self._partitions)

    def is_leader(self, role: str | bytes) -> bool:
        """Whether the fake leads ``role``."""
        return self.leads(self.partition_for(role))

    def leads(self, partition: int) -> bool:
        """Whether the fake leads ``partition``."""
        return partition in self._led

    def led_partitions(self) -> frozenset[int]:
        """Led partitions."""
        return frozenset(self._led)

    def assigned_partitions(self) -> frozenset[int]:
        """Assigned partitions."""
        return frozenset(self._assigned)

    @property
    def takeover(self) -> FakeTakeover:
        """The hand-over hooks (:class:`neli.takeover.Takeover`), answering what the test sets."""
        return self._takeover

    def add_barrier(self, handler: BarrierHandler) -> Callable[[], None]:
        """Register a barrier handler; returns a remover."""
        return self._bus.add_barrier(handler)

    def add_heartbeat_meta(self, provider: Callable[[], Mapping[str, Any]]) -> None:
        """Add a heartbeat meta provider (see :meth:`heartbeat_meta`)."""
        self._meta.append(provider)

    def heartbeat_meta(self) -> dict[str, str]:
        """The meta a real member would put in its next heartbeat (all providers, merged).

        Pass it to another fake's :meth:`acquire` as ``predecessor`` to act out a fail-over.
        """
        meta: dict[str, str] = {"member_id": self.member_id, "member_name": self.member_name}
        for provider in self._meta:
            meta.update({str(k): str(v) for k, v in provider().items()})
        return meta

    def events(self) -> AsyncIterator[LeadershipEvent]:
        """Yield events until :meth:`close`."""
        return self._bus.events()

    async def close(self) -> None:
        """Revoke everything and end event streams."""
        await self.revoke(*sorted(self._assigned), reason="closed")
        self._bus.close()

    def status(self) -> NeliStatus:
        """A status snapshot like :meth:`neli.Neli.status`."""
        return NeliStatus(
            group=self.group_id,
            member_id=self.member_id,
            member_name=self.member_name,
            partitions=self._partitions,
            assigned=tuple(sorted(self._assigned)),
            led=tuple(sorted(self._led)),
        )

    # -- driving it ---------------------------------------------------------------------------

    async def acquire(
        self,
        *partitions: int,
        reason: str = "assigned",
        predecessor: Mapping[str, str] | None = None,
    ) -> None:
        """Assign and lead ``partitions`` (ACQUIRED for each not already led).

        Args:
            partitions: the partitions.
            reason: the events' reason.
            predecessor: the previous leader's heartbeat meta, delivered as
                :attr:`~neli.LeadershipEvent.predecessor` (e.g. another fake's
                :meth:`heartbeat_meta`).
        """
        for p in self._check(partitions):
            self._assigned.add(p)
            if p not in self._led:
                self._led.add(p)
                await self._emit(EventKind.ACQUIRED, p, reason, predecessor)

    async def revoke(self, *partitions: int, reason: str = "rebalance") -> None:
        """Take ``partitions`` away (REVOKED for each that was led or fenced)."""
        for p in self._check(partitions):
            if p in self._assigned:
                self._assigned.discard(p)
                self._led.discard(p)
                await self._emit(EventKind.REVOKED, p, reason)

    async def fence(self, *partitions: int, reason: str = "own heartbeat not returned") -> None:
        """Stop leading ``partitions`` while keeping them assigned (FENCED)."""
        for p in self._check(partitions):
            if p in self._led:
                self._led.discard(p)
                await self._emit(EventKind.FENCED, p, reason)

    async def resume(self, *partitions: int, reason: str = "heartbeats fresh again") -> None:
        """Lead fenced ``partitions`` again (RESUMED)."""
        for p in self._check(partitions):
            if p in self._assigned and p not in self._led:
                self._led.add(p)
                await self._emit(EventKind.RESUMED, p, reason)

    def _check(self, partitions: Iterable[int]) -> list[int]:
        out = list(partitions)
        for p in out:
            if not 0 <= p < self._partitions:
                raise ValueError(f"partition {p} out of range 0..{self._partitions - 1}")
        return out

    async def _emit(
        self,
        kind: EventKind,
        partition: int,
        reason: str,
        predecessor: Mapping[str, str] | None = None,
    ) -> None:
        event = LeadershipEvent(
            kind=kind,
            partition=partition,
            group=self.group_id,
            member_id=self.member_id,
            member_name=self.member_name,
            reason=reason,
            at_mono=self._clock.monotonic(),
            at_wall=self._clock.wall(),
            predecessor=None if predecessor is None else dict(predecessor),
        )
        self.history.append(event)
        await self._bus.deliver(event, contain_errors=False)
