"""The standalone subscriber client over an in-memory topic: filters, last values, resume, gaps."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    Message,
    TopicPartition,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from pricing_ha.dedupe.control import CHECKPOINT, RESET, PartitionView
from pricing_ha.errors import TopicLayoutError
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.kafka.partitioning import instrument_partition
from pricing_ha.publishing.pricing import Price as WirePrice
from pricing_ha.publishing.pricing import encode_price
from pricing_ha.subscribing import _last_values
from pricing_ha.subscribing.client import Gap, Price, PriceClient

TOPIC = "prices"
M = 4


class FakeTopic:
    """One topic's partitions in memory behind the consumer calls the client makes."""

    def __init__(self, partitions: int = M) -> None:
        """An empty topic."""
        self.log: dict[int, list[Message]] = {p: [] for p in range(partitions)}
        self.cursor: dict[int, int] = {}
        self.eof: set[int] = set()
        self.assignments: list[list[tuple[int, int]]] = []
        self.committed_offsets: dict[int, int] = {}
        self.conf: dict[str, Any] = {}
        self.closed = False

    def price(self, instrument: str, seq: int, *, epoch: int = 0) -> None:
        """Append a price of ``instrument`` to its partition."""
        wire = WirePrice(
            instrument=instrument, seq=seq, bid=1.0, ask=1.2, mid=1.1, source_time_ns=7, epoch=epoch
        )
        self._append(
            instrument_partition(instrument, len(self.log)),
            instrument.encode(),
            encode_price(wire),
            [],
        )

    def control(self, p: int, kind: bytes, value: bytes = b"", **headers: bytes) -> None:
        """Append a control record to partition ``p``."""
        self._append(p, None, value, [(CONTROL_HEADER, kind), *headers.items()])

    def _append(self, p: int, key: bytes | None, value: bytes, headers: list[Any]) -> None:
        offset = len(self.log[p])
        self.log[p].append(
            Message(topic=TOPIC, partition=p, offset=offset, key=key, value=value, headers=headers)
        )

    def factory(self, conf: dict[str, Any]) -> FakeTopic:
        """The consumer factory the client is given."""
        self.conf = conf
        return self

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Metadata of the one topic."""
        meta = SimpleNamespace(error=None, partitions=dict.fromkeys(self.log))
        return SimpleNamespace(topics={TOPIC: meta})

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> Any:
        """(0, end) of a partition."""
        return 0, len(self.log[tp.partition])

    def committed(self, tps: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        """The committed offsets (-1001 where none)."""
        return [
            TopicPartition(TOPIC, tp.partition, self.committed_offsets.get(tp.partition, -1001))
            for tp in tps
        ]

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        """Store the offsets."""
        self.committed_offsets |= {tp.partition: tp.offset for tp in offsets}

    def assign(self, tps: list[TopicPartition]) -> None:
        """Read each partition from its offset (END/BEGINNING resolved)."""
        ends = {p: len(log) for p, log in self.log.items()}
        resolve = {OFFSET_END: None, OFFSET_BEGINNING: 0}
        self.cursor = {
            tp.partition: ends[tp.partition]
            if tp.offset == OFFSET_END
            else resolve.get(tp.offset, tp.offset) or 0
            for tp in tps
        }
        self.eof = set()
        self.assignments.append([(tp.partition, tp.offset) for tp in tps])

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """The next records of the assigned partitions, then an EOF event for each."""
        out: list[Message] = []
        for p, first in self.cursor.items():
            at = first
            while at < len(self.log[p]) and len(out) < num_messages:
                out.append(self.log[p][at])
                at += 1
            self.cursor[p] = at
            if at == len(self.log[p]) and p not in self.eof and len(out) < num_messages:
                self.eof.add(p)
                out.append(
                    Message(
                        topic=TOPIC,
                        partition=p,
                        offset=at,
                        error=KafkaError(KafkaError._PARTITION_EOF),
                    )
                )
        return out

    def close(self) -> None:
        """Remember the close."""
        self.closed = True


def sym(partition: int, n: int = 0) -> str:
    """The ``n``-th symbol of the form ``S<i>`` that lives on ``partition``."""
    found = [f"S{i}" for i in range(1000) if instrument_partition(f"S{i}", M) == partition]
    return found[n]


async def drain(client: PriceClient) -> list[Price]:
    """Everything the client has now."""
    out: list[Price] = []
    while batch := await client.poll(0):
        out += batch
    return out


def seqs(prices: list[Price]) -> list[tuple[str, int, bool]]:
    """(instrument, seq, last_value) of each price."""
    return [(p.instrument, p.seq, p.last_value) for p in prices]


async def test_filter_assigns_only_its_partitions_and_yields_only_its_instruments() -> None:
    """A one-instrument filter assigns one partition; a neighbour on it is dropped."""
    topic = FakeTopic()
    a, neighbour, other = sym(1), sym(1, 1), sym(2)
    client = PriceClient(
        "b:9092", TOPIC, instruments=[a], last_values=False, consumer_factory=topic.factory
    )
    await client.start()
    assert topic.assignments[-1] == [(1, OFFSET_END)]
    for s in (a, neighbour, other, a):
        topic.price(s, 1 if s != a or not topic.log[1] else 2)
    got = await drain(client)
    assert {p.instrument for p in got} == {a}
    assert topic.conf["isolation.level"] == "read_committed"
    await client.close()
    assert topic.closed


async def test_last_values_come_first_then_live_prices_without_a_gap() -> None:
    """On connect: each instrument's latest price (flagged), then live from the next seq."""
    topic = FakeTopic()
    a, b = sym(0), sym(0, 1)
    for seq in range(1, 4):
        topic.price(a, seq)
    topic.price(b, 1)
    gaps: list[Gap] = []
    client = PriceClient(
        "b:9092", TOPIC, instruments=[a, b], consumer_factory=topic.factory, on_gap=gaps.append
    )
    await client.start()
    topic.price(a, 4)
    got = await drain(client)
    assert seqs(got) == [(a, 3, True), (b, 1, True), (a, 4, False)]
    assert gaps == []


async def test_last_values_without_a_filter_stop_at_the_checkpoints_instruments() -> None:
    """Unfiltered read-back finds every instrument a checkpoint names, reading back no further."""
    topic = FakeTopic(partitions=M)
    old = sym(0)
    for _ in range(10_000):  # history before the old price: never read
        topic.control(0, b"tick")
    topic.price(old, 1)
    for _ in range(2000):  # more than the first window: the old price is found by reading back
        topic.control(0, b"tick")
    view = PartitionView(position=len(topic.log[0]), high={old: 1})
    topic.control(0, CHECKPOINT, view.encode())
    topic.price(sym(0, 1), 9)
    client = PriceClient("b:9092", TOPIC, consumer_factory=topic.factory)
    await client.start()
    got = await drain(client)
    assert seqs(got) == [(old, 1, True), (sym(0, 1), 9, True)]
    # the first window (too short), then one four times longer, then live from the end
    assert [a[0] for a in topic.assignments] == [(0, 10_979), (0, 7907), (0, 12_003)]


async def test_resume_from_positions_replays_from_there_and_reports_the_next_position() -> None:
    """positions= starts there (no last values); positions() is after the last price out."""
    topic = FakeTopic()
    a = sym(3)
    for seq in range(1, 6):
        topic.price(a, seq)
    client = PriceClient(
        "b:9092", TOPIC, instruments=[a], positions={3: 2}, consumer_factory=topic.factory
    )
    await client.start()
    got = [p async for p in _take(client, 3)]
    assert [p.seq for p in got] == [3, 4, 5]
    assert client.positions() == {3: 5}


async def _take(client: PriceClient, n: int) -> Any:
    async for price in client:
        yield price
        n -= 1
        if n == 0:
            return


async def test_group_commit_is_where_the_next_client_resumes() -> None:
    """commit() stores positions in the group; a new client of the group starts there."""
    topic = FakeTopic()
    a = sym(2)
    for seq in range(1, 4):
        topic.price(a, seq)
    first = PriceClient(
        "b:9092",
        TOPIC,
        instruments=[a],
        group_id="g",
        positions={2: 0},
        consumer_factory=topic.factory,
    )
    await first.start()
    await drain(first)
    await first.commit()
    topic.price(a, 4)
    second = PriceClient(
        "b:9092", TOPIC, instruments=[a], group_id="g", consumer_factory=topic.factory
    )
    await second.start()
    assert topic.assignments[-1] == [(2, 3)]
    assert seqs(await drain(second)) == [(a, 4, False)]
    assert topic.conf["group.id"] == "g"


async def gap_watcher(instrument: str) -> tuple[FakeTopic, PriceClient, list[Gap]]:
    """A started client of one instrument on a fresh topic, and the gaps it reports."""
    topic = FakeTopic()
    gaps: list[Gap] = []
    client = PriceClient(
        "b:9092",
        TOPIC,
        instruments=[instrument],
        on_gap=gaps.append,
        consumer_factory=topic.factory,
    )
    await client.start()
    return topic, client, gaps


async def test_gap_callback_fires_on_a_forged_gap_and_duplicates_are_dropped() -> None:
    """A jump of seq calls on_gap with the missing count; a repeated seq is never handed out."""
    topic, client, gaps = await gap_watcher(a := sym(1))
    for seq in (1, 2, 5, 5, 4, 6):
        topic.price(a, seq)
    got = await drain(client)
    assert [p.seq for p in got] == [1, 2, 5, 6]
    assert [(g.instrument, g.missing, g.before.seq) for g in gaps] == [(a, 2, 5)]
    assert client.duplicates == 2


async def test_a_new_epoch_restarts_the_seq_check_and_a_reset_restarts_the_mark() -> None:
    """Seq 1 of a later epoch is no gap; after a reset control record a lower seq is taken."""
    topic, client, gaps = await gap_watcher(a := sym(1))
    topic.price(a, 7, epoch=1)
    topic.price(a, 1, epoch=2)
    topic.control(1, RESET, instrument=a.encode())
    topic.price(a, 1, epoch=1)
    assert [(p.epoch, p.seq) for p in await drain(client)] == [(1, 7), (2, 1), (1, 1)]
    assert gaps == []


async def test_stale_callback_once_per_silence() -> None:
    """A filtered instrument silent beyond the bound is reported once, again after it resumes."""
    now = [100.0]
    topic = FakeTopic()
    a = sym(0)
    stale: list[tuple[str, float]] = []
    client = PriceClient(
        "b:9092",
        TOPIC,
        instruments=[a],
        stale_after_s=2.0,
        clock=lambda: now[0],
        on_stale=lambda i, s: stale.append((i, s)),
        consumer_factory=topic.factory,
    )
    await client.start()
    now[0] = 103.0
    await client.poll(0)
    await client.poll(0)
    assert stale == [(a, 3.0)]
    topic.price(a, 1)
    await client.poll(0)
    now[0] = 106.0
    await client.poll(0)
    assert stale == [(a, 3.0), (a, 3.0)]


def test_fixed_settings_cannot_be_overridden() -> None:
    """read_uncommitted would show a deposed relay's aborted prices: refused."""
    with pytest.raises(ValueError, match=r"isolation\.level"):
        PriceClient("b:9092", settings={"isolation.level": "read_uncommitted"})
    with pytest.raises(ValueError, match="group_id"):
        PriceClient("b:9092", settings={"group.id": "g"})


async def test_missing_topic_is_a_layout_error() -> None:
    """A topic absent from the metadata gives a TopicLayoutError and closes the consumer."""
    topic = FakeTopic()
    client = PriceClient("b:9092", "nope", consumer_factory=topic.factory)
    with pytest.raises(TopicLayoutError, match="nope"):
        async with client:
            pass
    assert topic.closed


async def test_security_settings_and_callbacks_reach_the_consumer() -> None:
    """The caller's librdkafka settings, an MSK IAM oauth_cb included, reach the consumer."""
    topic = FakeTopic()

    def token(_config: str | None) -> tuple[str, float]:
        return "token", 0.0

    settings = {"security.protocol": "SASL_SSL", "oauth_cb": token}
    async with PriceClient("b:9092", TOPIC, settings=settings, consumer_factory=topic.factory):
        pass
    assert topic.conf["oauth_cb"] is token
    assert topic.conf["security.protocol"] == "SASL_SSL"
    assert topic.conf["bootstrap.servers"] == "b:9092"


def test_the_package_exports_the_client() -> None:
    """``pricing_ha.subscribing`` exports exactly the client, its price and its gap, sorted."""
    import pricing_ha.subscribing as facade

    assert facade.__all__ == sorted(facade.__all__) == ["Gap", "Price", "PriceClient"]
    assert facade.PriceClient is PriceClient


async def test_the_default_group_id_is_granted_to_the_subscriber_role() -> None:
    """With no group_id, the consumer's id is one the subscriber role's ACLs allow."""
    from fnmatch import fnmatchcase

    from pricing_ha.config import AppConfig
    from pricing_ha.security import role_table

    topic = FakeTopic()
    async with PriceClient("b:9092", TOPIC, consumer_factory=topic.factory):
        pass
    grants = role_table(AppConfig())["subscriber"].groups
    assert any(fnmatchcase(topic.conf["group.id"], g) for g in grants), grants


_NAMES = ("A", "B", "C", "D", "E")


@settings(max_examples=150)
@given(
    events=st.lists(st.sampled_from((*_NAMES, "tick", "checkpoint")), max_size=60),
    wanted=st.none() | st.frozensets(st.sampled_from(_NAMES), min_size=1),
)
def test_read_back_finds_the_latest_price_of_every_instrument(
    events: list[str], wanted: frozenset[str] | None
) -> None:
    """Whatever the history, the read-back (in windows of 4 here) returns exactly the latest
    record of each instrument (of the filter) priced on the partition, given checkpoints that
    name every instrument priced before them, as the relay's do."""
    topic = FakeTopic(partitions=1)
    latest: dict[str, int] = {}
    seq = 0
    for event in events:
        if event == "tick":
            topic.control(0, b"tick")
        elif event == "checkpoint":
            view = PartitionView(position=len(topic.log[0]), high=dict.fromkeys(latest, 1))
            topic.control(0, CHECKPOINT, view.encode())
        else:
            seq += 1
            latest[event] = len(topic.log[0])
            topic.price(event, seq)
    keys = None if wanted is None else {0: {w.encode() for w in wanted}}
    with patch.object(_last_values, "_FIRST_WINDOW", 4):
        found = _last_values.read_last_values(
            topic, TOPIC, [0], keys, max_records=1000, timeout_s=1.0
        )
    expected = {n: o for n, o in latest.items() if wanted is None or n in wanted}
    assert {(m.key() or b"").decode(): m.offset() for m in found.records} == expected
    assert found.ends == {0: len(topic.log[0])}


def test_the_clients_price_carries_every_field_of_the_wire_contracts_price() -> None:
    """The client's Price is the wire contract's price plus where it was read: no field lost."""
    import dataclasses

    from pricing_ha import wire

    fields = {f.name for f in dataclasses.fields(Price)}
    assert set(wire.Price.__struct_fields__) <= fields
    assert fields - set(wire.Price.__struct_fields__) == {"partition", "offset", "last_value"}
