"""Every producer recovers from a broker pause longer than its message timeout (issue 17).

An idempotent producer whose records time out bumps its epoch locally, and what it timed out
may or may not have landed: each component replaces such a producer and replays what was not
acknowledged (:mod:`pricing_ha.kafka.producers`). Each test runs
the real producing code path of one component (the feed's loop, a publisher's quote worker, a
relay's worker; the workers without NELI, leading every partition) against a broker, and in the
``paused`` variant SIGSTOPs the broker for ``PAUSE_S`` > ``message.timeout.ms``. It then checks,
from the data read back, that nothing was lost, and that the first successful delivery (a
delivery callback without error, as the component sees it) came within ``RESUME_BOUND_S`` of
SIGCONT. The ``steady`` variant, without a pause, also runs against an external broker
(``PRICING_HA_BOOTSTRAP``), which a test cannot pause. The pausing and the recording of
deliveries, with the timings they rest on, are in :mod:`tests.integration.broker.broker_pause`.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException

from neli.testing import FakeTakeover
from pricing_ha.config import AppConfig, BrokerConfig, RelayConfig, TopicsConfig
from pricing_ha.dedupe.relay import RelayStats, RelayWorker
from pricing_ha.feed.producer import FeedRunSummary, run_feed
from pricing_ha.feed.sources import SyntheticMarket, default_symbols
from pricing_ha.kafka.topics import create_topics, make_admin
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import Record, read_topic
from pricing_ha.local.waiting import wait_for
from pricing_ha.member.worker import PartitionWorker
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.publishing.quotes import parse_quote
from pricing_ha.telemetry import Telemetry
from tests.integration.broker.broker_pause import (
    MESSAGE_TIMEOUT_MS,
    Deliveries,
    MidBatchPause,
    Target,
    assert_resumed_in_time,
    pause_broker,
    record_deliveries,
)

M = 2


class _Leading:
    """A relay's leadership source that leads every partition, with no grace periods."""

    def __init__(self) -> None:
        self.takeover = FakeTakeover()  # no grace periods, no stall, nothing known

    def leads(self, _partition: int) -> bool:
        return True


INSTRUMENTS = 8
BACKLOG = 20_000  # quotes queued before a worker starts: it is busy producing when paused
PAUSE_AT = 1_000  # the publisher's and the relay's record during whose produce the broker stops
FEED_RATE_HZ = 400.0

Key = tuple[str, int]  # (instrument, seq)


@pytest.fixture(params=["steady", "paused"])
def target(request: pytest.FixtureRequest) -> Target:
    """The session broker (steady), or a broker of the test's own that it pauses (paused)."""
    if request.param == "paused":
        # Skips, saying why, when PRICING_HA_BOOTSTRAP names a broker we cannot SIGSTOP.
        broker: LocalKafka = request.getfixturevalue("own_broker")
        return Target(broker.bootstrap, broker)
    return Target(request.getfixturevalue("bootstrap"), None)


@pytest.fixture
def cfg(target: Target) -> Iterator[AppConfig]:
    """A configuration with fresh topics on the target broker (deleted afterwards)."""
    prefix = f"recovery-{uuid.uuid4().hex[:8]}"
    config = AppConfig(
        broker=BrokerConfig(
            bootstrap_servers=target.bootstrap,
            # The publisher's and the feed's producers take it from here (the operator's way);
            # consumers log that they ignore it.
            librdkafka={"message.timeout.ms": str(MESSAGE_TIMEOUT_MS)},
        ),
        topics=TopicsConfig(
            quotes=f"{prefix}.quotes",
            neli=f"{prefix}.neli",
            raw=f"{prefix}.raw",
            prices=f"{prefix}.prices",
            dlq=f"{prefix}.quotes.dlq",
            raw_dlq=f"{prefix}.raw.dlq",
            partitions=M,
        ),
        # The relay's prices go through a transactional producer per partition: a stalled
        # transaction ends that producer, and the partition is taken up again under a new one.
        relay=RelayConfig(
            session_timeout_ms=MESSAGE_TIMEOUT_MS,
            output_timeout_ms=MESSAGE_TIMEOUT_MS,
        ),
    )
    admin = make_admin(config)
    create_topics(admin, config)
    yield config
    if target.broker is None:  # the paused test's broker goes away with its topics
        names = list(config.topics.by_role().values())
        for future in admin.delete_topics(names, operation_timeout=10).values():
            try:
                future.result(timeout=15)
            except KafkaException as exc:  # best effort: a leftover topic harms nobody
                print(f"could not delete a test topic: {exc}")


@pytest.fixture
def deliveries(monkeypatch: pytest.MonkeyPatch) -> Deliveries:
    """Every producer's successful deliveries (:func:`.broker_pause.record_deliveries`)."""
    return record_deliveries(monkeypatch)


def feed_backlog(cfg: AppConfig, count: int) -> dict[str, int]:
    """Queue ``count`` quotes with the feed; return each instrument's last seq."""
    market = SyntheticMarket(default_symbols(INSTRUMENTS), seed=17)
    summary = run_feed(cfg, market.quotes(), rate_hz=0, count=count)
    assert summary.ok, summary.render()
    return {symbol: t.last_seq or 0 for symbol, t in summary.instruments.items()}


def expected_keys(last: dict[str, int]) -> set[Key]:
    """Every (instrument, seq) up to each instrument's last seq."""
    return {(i, s) for i, n in last.items() for s in range(1, n + 1)}


def price_keys(records: list[Record]) -> list[Key]:
    """(instrument, seq) of each price record, in topic order per partition."""
    ordered = sorted(records, key=lambda r: (r.partition, r.offset))
    return [(r.key.decode(), int(r.headers["seq"])) for r in ordered if r.key is not None]


def run_worker(worker: PartitionWorker) -> None:
    """Start a worker that leads every partition (no NELI: the producing path only)."""
    worker.start()
    for partition in range(M):
        worker.request("assign", partition)


def wait_for_prices(cfg: AppConfig, topic: str, want: set[Key]) -> list[Key]:
    """Read ``topic`` until it holds every key of ``want``; return what it holds."""
    got: list[Key] = []

    def complete() -> bool:
        got[:] = price_keys(read_topic(cfg.broker.bootstrap_servers, topic, M, idle_s=0.5))
        return want <= set(got)

    wait_for(
        complete, 90, lambda: f"{len(want - set(got))} prices missing on {topic}", interval_s=0
    )
    return got


def publish(cfg: AppConfig, stats: PublisherStats, member: str = "a") -> QuoteWorker:
    """A publisher's quote worker (group p1), started, leading every partition."""
    worker = QuoteWorker(
        cfg, "p1", member, lambda _p: True, stats, telemetry=Telemetry.noop("test")
    )
    run_worker(worker)
    return worker


def test_feed_recovers_and_sends_every_quote(
    target: Target, cfg: AppConfig, deliveries: Deliveries
) -> None:
    """The feed replaces its wedged producer and re-sends what was pending: no seq is missing."""
    stop = threading.Event()
    result: list[FeedRunSummary] = []
    client = "pricing-ha-feed"

    def feed() -> None:
        market = SyntheticMarket(default_symbols(INSTRUMENTS), seed=17)
        result.append(
            run_feed(
                cfg,
                market.quotes(),
                rate_hz=FEED_RATE_HZ,
                should_stop=stop.is_set,
                producer_factory=deliveries.factory,
            )
        )

    thread = threading.Thread(target=feed, name="feed", daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: deliveries.count(client) >= 100, 30, "the feed to deliver", interval_s=0.05
        )
        if target.broker is not None:
            sigcont = pause_broker(target)
            assert_resumed_in_time(deliveries, client, sigcont)
            after = deliveries.count(client)
            wait_for(
                lambda: deliveries.count(client) >= after + 200,
                30,
                "the feed to keep delivering",
                interval_s=0.05,
            )
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()
    (summary,) = result
    assert summary.ok, summary.render()
    assert summary.failed == 0
    if target.broker is not None:
        assert summary.producer_replacements >= 1
    else:
        assert summary.producer_replacements == 0
    last = {symbol: t.last_seq or 0 for symbol, t in summary.instruments.items()}
    records = read_topic(cfg.broker.bootstrap_servers, cfg.topics.quotes, M, idle_s=0.5)
    on_topic: Counter[Key] = Counter()
    for r in records:
        assert r.value is not None
        q = parse_quote(r.value, r.key)
        on_topic[q.instrument, q.seq] += 1
    want = expected_keys(last)
    assert set(on_topic) == want, f"missing {sorted(want - set(on_topic))[:10]}"  # at least once
    print(
        f"feed: {len(want)} quotes, {sum(on_topic.values()) - len(want)} sent twice, "
        f"{summary.producer_replacements} replacements"
    )


def test_publisher_recovers_and_publishes_every_quote(
    target: Target, cfg: AppConfig, deliveries: Deliveries
) -> None:
    """A publisher replaces its wedged producer and replays: every quote is priced, once each."""
    want = expected_keys(feed_backlog(cfg, BACKLOG))
    stats = PublisherStats()
    client = "a-prices"
    pause = None if target.broker is None else MidBatchPause(target.broker)
    if pause is not None:
        pause.arm(deliveries, client, at=PAUSE_AT)
    worker = publish(cfg, stats)
    try:
        if pause is not None:
            sigcont = pause.wait()
            assert worker.output_problem() is not None  # readiness: not ready at SIGCONT
            assert_resumed_in_time(deliveries, client, sigcont)
        got = wait_for_prices(cfg, cfg.topics.raw, want)
        wait_for(lambda: worker.output_problem() is None, 10, "the publisher's output to be ready")
    finally:
        worker.stop()
        if pause is not None:
            pause.disarm()
    assert worker.error is None
    assert set(got) == want  # exactly once after dedupe: nothing missing, nothing foreign
    if target.broker is not None:
        assert stats.producer_replacements >= 1
        assert stats.delivery_failures >= 1
    else:
        assert stats.producer_replacements == 0
    print(
        f"publisher: {len(want)} quotes, {len(got) - len(want)} duplicates on prices.raw, "
        f"{stats.producer_replacements} replacements"
    )


def test_relay_recovers_and_relays_every_price_exactly_once(
    target: Target, cfg: AppConfig, deliveries: Deliveries
) -> None:
    """A relay whose transaction the pause fails takes the partition up again (a new
    transactional producer, marks rebuilt): prices has every seq once, in order."""
    want = expected_keys(feed_backlog(cfg, BACKLOG))
    publisher = publish(cfg, PublisherStats())
    try:
        wait_for_prices(cfg, cfg.topics.raw, want)
    finally:
        publisher.stop()
    stats = RelayStats()
    client = "relay-r1-prices-0"  # partition 0's transactional producer (every generation)
    pause = None if target.broker is None else MidBatchPause(target.broker)
    if pause is not None:
        # Its first records are control records (its takeover marker, checkpoints); the
        # PAUSE_AT-th is well inside the backlog's prices.
        pause.arm(deliveries, client, at=PAUSE_AT)
    worker = RelayWorker(cfg, "relay", "r1", _Leading(), stats, telemetry=Telemetry.noop("test"))
    run_worker(worker)
    try:
        if pause is not None:
            sigcont = pause.wait()
            assert worker.output_problem() is not None  # readiness: not ready at SIGCONT
            assert_resumed_in_time(deliveries, client, sigcont)
        got = wait_for_prices(cfg, cfg.topics.prices, want)
        wait_for(lambda: worker.output_problem() is None, 10, "the relay's output to be ready")
    finally:
        worker.stop()
        if pause is not None:
            pause.disarm()
    assert worker.error is None
    twice = [key for key, n in Counter(got).items() if n > 1]
    assert twice == [], f"{len(twice)} prices relayed twice, e.g. {twice[:5]}"
    assert set(got) == want
    by_instrument: dict[str, list[int]] = defaultdict(list)
    for instrument, seq in got:
        by_instrument[instrument].append(seq)
    assert all(seqs == sorted(seqs) for seqs in by_instrument.values())
    if target.broker is not None:
        assert stats.takeovers > M  # partition 0 taken up again after its transaction failed
    else:
        assert stats.takeovers == M
    print(f"relay: {len(want)} prices, {stats.takeovers} takeovers")
