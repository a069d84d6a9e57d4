"""The subscriber library over a scripted fake consumer: modes, order, gaps, duplicates, stats."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Message, TopicPartition

from pricing_ha.cli.subscribe import delivery_json
from pricing_ha.config import AppConfig
from pricing_ha.errors import TopicLayoutError
from pricing_ha.kafka.fetching import FETCH_WAIT_MS
from pricing_ha.publishing.pricing import Price, encode_price
from pricing_ha.subscribing.stats import InstrumentStats, SubscriberStats, percentiles
from pricing_ha.subscribing.subscriber import Delivery, Subscriber

CFG = AppConfig()
WINDOW_S = CFG.relay.reorder_window_ms / 1000


class FakeConsumer:
    """Serves scripted batches; records assignments and poll timeouts."""

    def __init__(self, topic: str, partitions: int = 2) -> None:
        """A topic with ``partitions`` partitions and nothing to read yet."""
        self.meta = {
            topic: SimpleNamespace(error=None, partitions=dict.fromkeys(range(partitions)))
        }
        self.batches: list[list[Message]] = []
        self.current: list[Message] = []  # the batch being read: records "already there"
        self.assigned: list[TopicPartition] = []
        self.timeouts: list[float] = []
        self.calls: list[tuple[int, float]] = []
        self.closed = False
        self.conf: dict[str, Any] = {}

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Metadata of the scripted topic."""
        return SimpleNamespace(topics=self.meta)

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Record the assignment."""
        self.assigned = partitions

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` of the current batch; a waiting call opens the next one."""
        self.calls.append((num_messages, timeout))
        if timeout > 0 or num_messages == 1:
            self.timeouts.append(timeout)
            if not self.current and self.batches:
                self.current = self.batches.pop(0)
        taken, self.current = self.current[:num_messages], self.current[num_messages:]
        return taken

    def close(self) -> None:
        """Remember the close."""
        self.closed = True


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        """Start at 100 s."""
        self.now = 100.0

    def __call__(self) -> float:
        """The current time."""
        return self.now


def raw(
    instrument: str,
    seq: int,
    group: str = "p1",
    *,
    offset: int = 0,
    publish_ns: int | None = 1_000,
    value: bytes | None = None,
) -> Message:
    """A price record as a publisher writes it."""
    price = Price(instrument=instrument, seq=seq, bid=1.0, ask=1.1, mid=1.05, source_time_ns=500)
    headers: list[tuple[str, str | bytes | None]] = [
        ("seq", str(seq).encode()),
        ("group", group.encode()),
        ("member", b"a"),
    ]
    if publish_ns is not None:
        headers.append(("publish_ns", str(publish_ns).encode()))
    return Message(
        topic="t",
        partition=0,
        offset=offset,
        key=instrument.encode(),
        value=encode_price(price) if value is None else value,
        headers=headers,
    )


async def started(
    *, direct: bool = False, clock: Clock | None = None, **kwargs: Any
) -> tuple[Subscriber, FakeConsumer]:
    """A started subscriber on a fake consumer."""
    topic = CFG.topics.raw if direct else CFG.topics.prices
    fake = FakeConsumer(topic)

    def factory(conf: dict[str, Any]) -> FakeConsumer:
        fake.conf = conf
        return fake

    sub = Subscriber(
        CFG,
        direct=direct,
        clock=clock or Clock(),
        wall_ns=lambda: 2_000_000_000,
        consumer_factory=factory,
        **kwargs,
    )
    await sub.start()
    return sub, fake


def pairs(ds: list[Delivery]) -> list[tuple[str, int]]:
    """(instrument, seq) of each delivery."""
    return [(d.instrument, d.seq) for d in ds]


async def test_relay_mode_reads_prices_from_the_end_of_every_partition() -> None:
    """Default: topic `prices`, every partition assigned at its end, no group commits."""
    sub, fake = await started()
    assert sub.topic == CFG.topics.prices
    assert [(tp.topic, tp.partition, tp.offset) for tp in fake.assigned] == [
        (CFG.topics.prices, 0, OFFSET_END),
        (CFG.topics.prices, 1, OFFSET_END),
    ]
    assert fake.conf["enable.auto.commit"] is False
    assert fake.conf["fetch.wait.max.ms"] == FETCH_WAIT_MS
    assert fake.conf["isolation.level"] == "read_committed"  # the relay's aborted records unseen
    await sub.close()
    assert fake.closed


async def test_from_beginning_assigns_the_first_offsets() -> None:
    """--from-beginning assigns every partition at its beginning."""
    sub, fake = await started(from_beginning=True)
    assert {tp.offset for tp in fake.assigned} == {OFFSET_BEGINNING}
    await sub.close()


async def test_missing_topic_is_a_layout_error() -> None:
    """A topic absent from the metadata gives a clear TopicLayoutError."""
    fake = FakeConsumer("some-other-topic")
    sub = Subscriber(CFG, consumer_factory=lambda conf: fake)
    with pytest.raises(TopicLayoutError, match="topics create"):
        async with sub:
            pass
    assert fake.closed, "a failed start closes the consumer"


async def test_relay_duplicate_is_dropped_as_a_defect_and_gap_reported() -> None:
    """On `prices` a repeated seq is a relay defect (dropped, counted); a jump is a gap."""
    sub, fake = await started()
    fake.batches = [[raw("X", 1), raw("X", 2), raw("X", 2, "p2"), raw("X", 5)]]
    got = await sub.poll(0.1)
    assert pairs(got) == [("X", 1), ("X", 2), ("X", 5)]
    assert [d.gap_before for d in got] == [0, 0, 2]
    x = sub.stats.instruments["X"]
    assert (x.delivered, x.duplicates, x.copies_dropped, x.gaps, x.gap_events) == (3, 1, 0, 2, 1)
    assert not sub.stats.ok
    await sub.close()


async def test_poll_waits_for_one_record_only_then_takes_what_is_there() -> None:
    """A poll waits for the first record, then drains without waiting (no added latency)."""
    sub, fake = await started()
    fake.batches = [[raw("X", 1), raw("X", 2)], [raw("X", 3)]]
    assert pairs(await sub.poll(0.1)) == [("X", 1), ("X", 2)]
    assert fake.calls[0] == (1, 0.1)
    assert fake.calls[1][1] == 0
    assert pairs(await sub.poll(0.1)) == [("X", 3)]
    await sub.close()


async def test_direct_mode_arbitrates_both_copies_once_in_order() -> None:
    """Direct mode reads prices.raw; the two groups' copies give each seq once, in order."""
    sub, fake = await started(direct=True)
    assert sub.topic == CFG.topics.raw
    fake.batches = [
        [raw("X", 1), raw("X", 1, "p2"), raw("X", 2, "p2"), raw("Y", 1), raw("X", 2)],
        [raw("Y", 1, "p2"), raw("X", 3), raw("X", 3, "p2")],
    ]
    got = await sub.poll(0.1) + await sub.poll(0.1)
    assert pairs(got) == [("X", 1), ("X", 2), ("Y", 1), ("X", 3)]
    assert got[1].source == "p2/a"
    summary = sub.stats.summary()
    assert (summary["delivered"], summary["copies_dropped"], summary["duplicates"]) == (4, 4, 0)
    assert summary["ok"] is True
    assert summary["mode"] == "direct"
    await sub.close()


async def test_direct_mode_holds_a_jump_for_the_reorder_window() -> None:
    """A jump waits for the other copy; the poll wait shrinks to the window's end."""
    clock = Clock()
    sub, fake = await started(direct=True, clock=clock)
    fake.batches = [[raw("X", 1), raw("X", 3)]]
    assert pairs(await sub.poll(1.0)) == [("X", 1)]
    assert sub.arbiter.next_deadline() == pytest.approx(clock.now + WINDOW_S)
    clock.now += WINDOW_S / 2
    assert await sub.poll(1.0) == []
    assert fake.timeouts[-1] == pytest.approx(WINDOW_S / 2)
    clock.now += WINDOW_S / 2
    got = await sub.poll(1.0)
    assert [(d.seq, d.gap_before) for d in got] == [(3, 1)]
    assert sub.stats.instruments["X"].gaps == 1
    await sub.close()


async def test_direct_mode_missing_copy_arriving_in_time_closes_the_hole() -> None:
    """The other group's copy of the missing seq arrives within the window: no gap."""
    sub, fake = await started(direct=True)
    fake.batches = [[raw("X", 1), raw("X", 3)], [raw("X", 2, "p2"), raw("X", 3, "p2")]]
    got = await sub.poll(0.1) + await sub.poll(0.1)
    assert [(d.seq, d.gap_before) for d in got] == [(1, 0), (2, 0), (3, 0)]
    assert sub.stats.ok
    await sub.close()


async def test_instrument_filter_and_invalid_records() -> None:
    """Only the chosen instruments are delivered; undecodable records are counted, skipped."""
    sub, fake = await started(instruments=["X"])
    bad_key = raw("X", 2, value=raw("Z", 2).value())
    fake.batches = [[raw("X", 1), raw("Y", 1), raw("X", 9, value=b"{not json"), bad_key]]
    got = await sub.poll(0.1)
    assert pairs(got) == [("X", 1)]
    assert sub.stats.invalid == 2
    assert "Y" not in sub.stats.instruments
    await sub.close()


async def test_instrument_filter_assigns_only_the_instruments_partitions() -> None:
    """`subscribe --instrument` assigns the instruments' partitions (murmur2), not all."""
    from pricing_ha.kafka.partitioning import instrument_partition

    wanted = next(f"S{i}" for i in range(100) if instrument_partition(f"S{i}", 2) == 1)
    for direct in (False, True):
        sub, fake = await started(direct=direct, instruments=[wanted])
        assert [(tp.partition, tp.offset) for tp in fake.assigned] == [(1, OFFSET_END)]
        await sub.close()


async def test_latency_comes_from_publish_header_else_source_time() -> None:
    """Latency is receive minus publish_ns, or minus the source time when no header."""
    sub, fake = await started()
    fake.batches = [[raw("X", 1, publish_ns=1_500_000_000), raw("X", 2, publish_ns=None)]]
    a, b = await sub.poll(0.1)
    assert a.latency_s == pytest.approx(0.5)
    assert b.latency_s == pytest.approx((2_000_000_000 - 500) / 1e9)
    assert list(sub.stats.publish_latency_s) == [pytest.approx(0.5)]
    await sub.close()


async def test_iteration_ends_after_close() -> None:
    """`async for` yields deliveries and stops once the subscriber is closed."""
    sub, fake = await started()
    fake.batches = [[raw("X", 1), raw("X", 2)]]
    seen: list[int] = []
    async for d in sub:
        seen.append(d.seq)
        if d.seq == 2:
            await sub.close()
    assert seen == [1, 2]
    assert await sub.poll(0.1) == []


def test_instrument_stats_check_the_delivered_stream_independently() -> None:
    """Stats count gaps, out-of-order deliveries and the longest silence from the stream."""
    s = InstrumentStats()
    for seq, t in [(1, 0.0), (2, 0.1), (5, 0.15), (4, 0.9), (6, 1.0)]:
        s.on_delivered(seq, t)
    assert (s.first_seq, s.last_seq, s.delivered) == (1, 6, 5)
    assert (s.gaps, s.gap_events, s.out_of_order) == (2, 1, 1)
    assert s.max_silence_s == pytest.approx(0.75)


def test_percentiles_nearest_rank() -> None:
    """p50/p99/max in ms by nearest rank; no samples gives n = 0 only."""
    assert percentiles([]) == {"n": 0}
    got = percentiles([i / 1000 for i in range(1, 101)])
    assert got == {"n": 100, "p50_ms": 50.0, "p99_ms": 99.0, "max_ms": 100.0}


async def test_table_and_json_line_show_the_delivery() -> None:
    """The live table lists each instrument; a JSON line carries price, seq and source."""
    sub, fake = await started()
    fake.batches = [[raw("EURUSD", 7, "p2")]]
    (d,) = await sub.poll(0.1)
    table = sub.stats.render(now=1e9)
    assert "EURUSD" in table
    assert "1 delivered" in table
    line = orjson.loads(delivery_json(d))
    assert (line["instrument"], line["seq"], line["source"], line["mid"]) == (
        "EURUSD",
        7,
        "p2/a",
        1.05,
    )
    await sub.close()


def test_silence_beyond_the_bound_fails_the_verdict() -> None:
    """A gap in time longer than the staleness bound makes ok False, naming the instrument."""
    stats = SubscriberStats(direct=False, topic="prices", max_silence_bound_s=2.0)
    a = stats.instrument("A")
    a.on_delivered(1, 10.0)
    a.on_delivered(2, 11.5)
    assert stats.ok
    a.on_delivered(3, 14.0)  # silent for 2.5 s
    assert not stats.ok
    assert stats.silent_too_long == ["A"]
    assert stats.summary()["silent_too_long"] == ["A"]


def test_an_instrument_that_stops_for_good_is_caught_while_others_flow() -> None:
    """An instrument silent while another keeps delivering counts as silent (no end delivery)."""
    stats = SubscriberStats(direct=False, topic="prices", max_silence_bound_s=2.0)
    stats.instrument("A").on_delivered(1, 10.0)
    b = stats.instrument("B")
    for i in range(1, 40):
        b.on_delivered(i, 10.0 + 0.1 * i)
        stats.check_staleness(10.0 + 0.1 * i)
    assert stats.silent_too_long == ["A"]
    assert not stats.ok


def test_the_end_of_the_feed_is_not_an_outage() -> None:
    """When every instrument stops together, waiting after the end does not fail the verdict."""
    stats = SubscriberStats(direct=False, topic="prices", max_silence_bound_s=2.0)
    for name in ("A", "B"):
        stats.instrument(name).on_delivered(1, 10.0)
    stats.check_staleness(100.0)
    assert stats.ok


def test_no_bound_means_silence_is_reported_but_not_judged() -> None:
    """With the bound off, a long silence is in the figures and the verdict stays ok."""
    stats = SubscriberStats(direct=False, topic="prices", max_silence_bound_s=None)
    a = stats.instrument("A")
    a.on_delivered(1, 0.0)
    a.on_delivered(2, 100.0)
    assert stats.max_silence_s == 100.0
    assert stats.ok
