"""The neli API against a real broker, members in this process (behaviour, not fault timing)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from neli import (
    BrokerUnavailableError,
    EventKind,
    LeadershipEvent,
    LeaderTasks,
    Mode,
    Neli,
    NeliConfig,
    TopicError,
)
from neli.partitioner import KAFKA_PARTITIONER, role_partition
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.waiting import wait_for_async
from tests.integration.neli_harness import SESSION_MS, member_config

S = SESSION_MS / 1000


def test_role_partition_matches_librdkafka(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """A producer keyed by a role (murmur2 partitioner) lands on the partition NELI computes."""
    m = 7
    topic = topic_factory(m)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": KAFKA_PARTITIONER})
    landed: dict[str, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        landed[msg.key().decode()] = msg.partition()

    roles = ["EURUSD", "AAPL", "", "ü-utf8", *(f"SYM{i:03d}" for i in range(60))]
    for role in roles:
        producer.produce(topic, key=role.encode(), value=b"x", on_delivery=delivered)
    assert producer.flush(15) == 0
    assert landed == {r: role_partition(r, m) for r in roles}
    assert len(set(landed.values())) == m, "the sample should exercise every partition"


async def test_missing_topic_is_refused(bootstrap: str, unique_name: Any) -> None:
    """start() on a topic that does not exist raises TopicError naming it."""
    neli = Neli(member_config(bootstrap, unique_name("missing"), unique_name("g"), "m"))
    with pytest.raises(TopicError) as info:
        await neli.start()
    assert info.value.topic in str(info.value)


async def test_partition_count_mismatch_is_refused(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Any
) -> None:
    """start() refuses a topic whose partition count differs from expected_partitions."""
    topic = topic_factory(3)
    neli = Neli(member_config(bootstrap, topic, unique_name("g"), "m", expected_partitions=4))
    with pytest.raises(TopicError, match="3 partitions, expected 4"):
        await neli.start()


async def test_unreachable_broker_fails_within_bound(unused_tcp_port: int) -> None:
    """An unreachable broker gives BrokerUnavailableError after the bounded start timeout."""
    cfg = NeliConfig(
        bootstrap_servers=f"127.0.0.1:{unused_tcp_port}",
        group_id="g",
        topic="t",
        start_timeout_ms=1500,
    )
    t0 = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match="unavailable"):
        await Neli(cfg).start()
    assert time.monotonic() - t0 < 10


async def test_single_member_leads_every_role_and_reports_events(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Any
) -> None:
    """A lone member leads every partition, answers is_leader for roles and emits ACQUIRED."""
    m = 3
    topic = topic_factory(m)
    async with Neli(member_config(bootstrap, topic, unique_name("g"), "solo")) as neli:
        events: list[LeadershipEvent] = []
        neli.add_barrier(events.append)
        await wait_for_async(lambda: neli.led_partitions() == set(range(m)), 30, "leadership")
        await wait_for_async(lambda: len(events) >= m, 5, "events")
        assert {(e.kind, e.partition) for e in events} == {
            (EventKind.ACQUIRED, p) for p in range(m)
        }
        assert all(neli.is_leader(r) for r in ("EURUSD", "AAPL", "X"))
        status = neli.status()
        assert status.led == tuple(range(m))
    assert neli.led_partitions() == frozenset()
    assert [e.kind for e in events[m:]] == [EventKind.REVOKED] * m


async def test_revocation_waits_for_barrier_and_leader_tasks(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Any
) -> None:
    """Exclusive: a joining member gets a partition only after the old leader's work stopped."""
    topic = topic_factory(2)
    group = unique_name("g")
    first = Neli(member_config(bootstrap, topic, group, "first", mode=Mode.EXCLUSIVE))
    stopped: dict[int, float] = {}
    running: set[int] = set()

    async def work(partition: int) -> None:
        running.add(partition)
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.5)  # in-flight work that must finish before hand-over
            running.discard(partition)
            stopped[partition] = time.monotonic()

    await first.start()
    tasks = LeaderTasks(first, work)
    await wait_for_async(lambda: running == {0, 1}, 30, "first to lead both partitions")
    second = Neli(member_config(bootstrap, topic, group, "second", mode=Mode.EXCLUSIVE))
    assigned: dict[int, float] = {}

    async def watch_assignment() -> None:
        while True:
            for p in second.assigned_partitions():
                assigned.setdefault(p, time.monotonic())
            await asyncio.sleep(0.005)

    await second.start()
    watcher = asyncio.create_task(watch_assignment())
    try:
        await wait_for_async(lambda: len(second.led_partitions()) == 1, 30, "second to lead one")
        (moved,) = second.led_partitions()
        assert moved in stopped, "the old leader's task must have stopped first"
        # The rebalance could not complete (so second could not even be assigned the
        # partition) before the old leader's in-flight work had finished.
        assert stopped[moved] <= assigned[moved]
        assert not first.leads(moved)
        assert running == {1 - moved}
    finally:
        watcher.cancel()
        await tasks.close()
        await second.close()
        await first.close()


async def test_new_leader_learns_its_predecessor(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Any
) -> None:
    """ACQUIRED after a hand-over names the previous leader and carries its heartbeat meta."""
    topic = topic_factory(4)
    group = unique_name("g")
    a = Neli(
        member_config(bootstrap, topic, group, "alpha"),
        heartbeat_meta=lambda: {"trace": "ctx-alpha"},
    )
    b = Neli(member_config(bootstrap, topic, group, "beta"))
    events: list[LeadershipEvent] = []
    b.add_barrier(events.append)
    await a.start()
    await wait_for_async(lambda: a.led_partitions() == {0, 1, 2, 3}, 30, "alpha to lead all")
    await b.start()
    try:
        await wait_for_async(lambda: len(b.led_partitions()) == 2, 30, "beta to lead two")
        await wait_for_async(lambda: len(a.led_partitions()) == 2, 4 * S, "alpha to give two up")
        led_by_a = set(a.led_partitions())
        await a.close()
        await wait_for_async(
            lambda: b.led_partitions() == {0, 1, 2, 3}, 4 * S + 10, "beta to lead all"
        )
        taken = [e for e in events if e.kind is EventKind.ACQUIRED and e.partition in led_by_a]
        assert taken, events
        for e in taken:
            assert e.predecessor is not None, e
            assert e.predecessor["member_name"] == "alpha"
            assert e.predecessor["trace"] == "ctx-alpha"
    finally:
        await a.close()
        await b.close()


async def test_after_a_session_loss_the_member_rejoins_without_waiting_for_the_barrier(
    own_broker: LocalKafka, unique_name: Any
) -> None:
    """The broker is paused past S: the member's session is lost. Its barrier handler for
    that revocation is still busy when the member is assigned again (waiting for it would
    only delay the rejoin: the group has already moved on)."""
    bootstrap = own_broker.bootstrap
    topic = unique_name("t")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
    handler_done: list[float] = []
    lost: list[LeadershipEvent] = []

    async def slow_on_loss(event: LeadershipEvent) -> None:
        if event.kind is EventKind.REVOKED and event.reason == "session lost":
            lost.append(event)
            await asyncio.sleep(4 * S)  # in-flight work that takes long to abandon
            handler_done.append(time.monotonic())

    async with Neli(
        member_config(bootstrap, topic, unique_name("g"), "solo", mode=Mode.EXCLUSIVE)
    ) as neli:
        neli.add_barrier(slow_on_loss)
        await wait_for_async(lambda: neli.led_partitions() == {0, 1}, 30, "leadership")
        own_broker.pause()
        try:
            await asyncio.sleep(S + 1.5)  # the fault: a broker stall past the session timeout
        finally:
            own_broker.resume()
        await wait_for_async(lambda: bool(lost), 20, "the session-lost revocation")
        await wait_for_async(lambda: neli.led_partitions() == {0, 1}, 30, "leading again")
        assert not handler_done, "the rejoin waited for the barrier of a lost session"
        await wait_for_async(lambda: bool(handler_done), 4 * S + 5, "the handler to finish")


async def test_after_close_the_stall_guard_is_ticked_by_its_callers(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Any
) -> None:
    """Exclusive: after close, ``recovering()`` stays false for a caller asking often (the
    watchdog has stopped with the member; answering from it reported a stall stall_limit_ms
    after close, for good), and a gap between calls longer than stall_limit_ms is a stall."""
    cfg = member_config(bootstrap, topic_factory(2), unique_name("g"), "solo", mode=Mode.EXCLUSIVE)
    assert cfg.stall_limit_ms is not None
    limit_s = cfg.stall_limit_ms / 1000
    async with Neli(cfg) as neli:
        await wait_for_async(lambda: neli.led_partitions() == {0, 1}, 30, "leadership")
        assert not neli.takeover.recovering()
    deadline = time.monotonic() + 3 * limit_s
    while time.monotonic() < deadline:
        assert not neli.takeover.recovering(), "a closed member asked often is not stalled"
        await asyncio.sleep(limit_s / 10)
    await asyncio.sleep(1.5 * limit_s)  # the stimulus: nobody asks for longer than the limit
    assert neli.takeover.recovering(), "a gap longer than stall_limit_ms must count as a stall"
