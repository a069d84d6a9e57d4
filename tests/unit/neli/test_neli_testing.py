"""neli.testing: FakeNeli behaves like a member users can drive, ManualClock like a clock."""

from __future__ import annotations

import asyncio

import pytest

from neli import EventKind, LeadershipEvent, NeliStatus
from neli.partitioner import role_partition
from neli.testing import FakeNeli, ManualClock


async def _collect(fake: FakeNeli, into: list[LeadershipEvent]) -> None:
    into.extend([event async for event in fake.events()])


async def test_events_stream_yields_what_was_emitted_until_close() -> None:
    """events() yields every emitted event in order, and ends when the fake closes."""
    fake = FakeNeli(partitions=3, group_id="p1", member_name="m1")
    seen: list[LeadershipEvent] = []
    reader = asyncio.create_task(_collect(fake, seen))
    await asyncio.sleep(0)  # the reader subscribes
    await fake.acquire(0, 2)
    await fake.fence(2, reason="stalled")
    await fake.resume(2)
    await fake.revoke(0)
    await fake.close()
    await asyncio.wait_for(reader, timeout=1.0)
    assert [(e.kind, e.partition) for e in seen] == [
        (EventKind.ACQUIRED, 0),
        (EventKind.ACQUIRED, 2),
        (EventKind.FENCED, 2),
        (EventKind.RESUMED, 2),
        (EventKind.REVOKED, 0),
        (EventKind.REVOKED, 2),
    ]
    assert seen == fake.history
    assert seen[2].reason == "stalled"
    assert seen[-1].reason == "closed"
    assert {(e.group, e.member_name) for e in seen} == {("p1", "m1")}


async def test_leadership_follows_the_driver_calls() -> None:
    """leads(), led_partitions() and assigned_partitions() reflect acquire/fence/resume/revoke."""
    fake = FakeNeli(partitions=4)
    await fake.acquire(1, 3)
    await fake.fence(3)
    assert fake.led_partitions() == frozenset({1})
    assert fake.assigned_partitions() == frozenset({1, 3})
    assert not fake.leads(3)
    await fake.resume(3)
    assert fake.leads(3)
    await fake.revoke(1)
    assert fake.led_partitions() == frozenset({3})
    assert fake.assigned_partitions() == frozenset({3})
    assert fake.status().led == (3,)


async def test_redundant_calls_emit_nothing() -> None:
    """Acquiring a led partition, fencing an unled one or revoking an unassigned one is silent."""
    fake = FakeNeli(partitions=2)
    await fake.acquire(0)
    await fake.acquire(0)
    await fake.fence(1)
    await fake.revoke(1)
    await fake.resume(0)
    assert [e.kind for e in fake.history] == [EventKind.ACQUIRED]


async def test_revoking_a_fenced_partition_emits_revoked() -> None:
    """A fenced partition that is revoked yields REVOKED, as the real member does."""
    fake = FakeNeli(partitions=1)
    await fake.acquire(0)
    await fake.fence(0)
    await fake.revoke(0)
    assert [e.kind for e in fake.history] == [
        EventKind.ACQUIRED,
        EventKind.FENCED,
        EventKind.REVOKED,
    ]


@pytest.mark.parametrize("method", ["acquire", "revoke", "fence", "resume"])
@pytest.mark.parametrize("partition", [-1, 4, 100])
async def test_out_of_range_partition_raises(method: str, partition: int) -> None:
    """Every driver call refuses a partition outside 0..M-1 and emits nothing."""
    fake = FakeNeli(partitions=4)
    with pytest.raises(ValueError, match="out of range"):
        await getattr(fake, method)(partition)
    assert fake.history == []


async def test_is_leader_uses_murmur2_partitioning() -> None:
    """is_leader(role) is true exactly for roles whose murmur2 partition the fake leads."""
    fake = FakeNeli(partitions=8)
    roles = [f"SYM{i}" for i in range(64)]
    await fake.acquire(5)
    for role in roles:
        assert fake.partition_for(role) == role_partition(role, 8)
        assert fake.is_leader(role) == (role_partition(role, 8) == 5)
    assert any(fake.is_leader(role) for role in roles)
    assert fake.is_leader(b"21") == (role_partition("21", 8) == 5)


async def test_barrier_handlers_are_awaited_and_removable() -> None:
    """Async barrier handlers finish before the driver call returns; the remover detaches them."""
    fake = FakeNeli(partitions=1)
    handled: list[EventKind] = []

    async def handler(event: LeadershipEvent) -> None:
        await asyncio.sleep(0)
        handled.append(event.kind)

    remove = fake.add_barrier(handler)
    await fake.acquire(0)
    assert handled == [EventKind.ACQUIRED]
    remove()
    await fake.revoke(0)
    assert handled == [EventKind.ACQUIRED]


async def test_sync_barrier_handlers_are_called() -> None:
    """A plain function works as a barrier handler too."""
    fake = FakeNeli(partitions=1)
    handled: list[LeadershipEvent] = []
    fake.add_barrier(handled.append)
    await fake.acquire(0)
    assert [e.kind for e in handled] == [EventKind.ACQUIRED]


def test_status_snapshot() -> None:
    """status() reports group, member, partition count, assignment and leadership."""
    fake = FakeNeli(partitions=3, group_id="p2", member_name="m9")
    assert fake.status() == NeliStatus(
        group="p2", member_id="m9/fake", member_name="m9", partitions=3, assigned=(), led=()
    )


def test_manual_clock_moves_only_when_advanced() -> None:
    """ManualClock starts where told and moves both clocks together only on advance()."""
    clock = ManualClock(mono=5.0, wall=100.0)
    assert (clock.monotonic(), clock.wall()) == (5.0, 100.0)
    assert (clock.monotonic(), clock.wall()) == (5.0, 100.0)
    clock.advance(2.5)
    assert (clock.monotonic(), clock.wall()) == (7.5, 102.5)
