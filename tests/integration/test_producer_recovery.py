"""Every producer recovers from a broker pause longer than its message timeout (issue 17).

An idempotent producer whose records time out bumps its epoch locally; the embedded broker
(Tansu) then fences it forever, with errors that are neither fatal nor retriable. Each test runs
the real producing code path of one component (the feed's loop, a publisher's quote worker, a
relay's worker; the workers without NELI, leading every partition) against a broker, and in the
``paused`` variant SIGSTOPs the broker for ``PAUSE_S`` > ``message.timeout.ms``. It then checks,
from the data read back, that nothing was lost, and that the first successful delivery (a
delivery callback without error, as the component sees it) came within ``RESUME_BOUND_S`` of
SIGCONT. The ``steady`` variant, without a pause, also runs against an external broker
(``PRICING_HA_BOOTSTRAP``), which a test cannot pause.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

import pricing_ha.kafka.producers
from pricing_ha.config import AppConfig, BrokerConfig, RelayConfig, TopicsConfig
from pricing_ha.dedupe.relay import RelayStats, RelayWorker
from pricing_ha.feed.producer import FeedRunSummary, run_feed
from pricing_ha.feed.sources import SyntheticMarket, default_symbols
from pricing_ha.kafka.topics import create_topics, make_admin
from pricing_ha.local.broker import EmbeddedBroker
from pricing_ha.local.cluster import Record, read_topic
from pricing_ha.member.worker import PartitionWorker
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.publishing.quotes import parse_quote
from pricing_ha.telemetry import Telemetry
from tests.waiting import wait_for

M = 2


class _Leading:
    """A relay's leadership source that leads every partition, with no grace periods."""

    def leads(self, _partition: int) -> bool:
        return True

    def in_grace(self) -> frozenset[int]:
        return frozenset()

    def end_grace(self, _partition: int) -> bool:
        return False

    def recovering(self) -> bool:
        return False

    def previous_holder_silent_s(self, _partition: int) -> float | None:
        return None  # the previous holder is this member itself: nobody else's heartbeat

    def assigned_since(self, _partition: int) -> float | None:
        return None


# message.timeout.ms of every producer under test (the feed's, the publisher's, the relay's) and
# the pause. librdkafka notices timeouts in a scan once a second, so a record queued when the
# pause began fails between T and T + 1 s into it: the pause must outlast T + 1 s for the wedge
# (and the replacement) to happen in it every time. The feed keeps producing during the pause:
# what its new producer queues at the replacement (>= T) fails from 2 T on, so the pause must
# end more than the ~0.5 s a new producer needs for its producer id before then. T = 3 s and a
# 4.5 s pause leave 0.5 s and 1 s of margin (T = 2 s would leave 0.25 s on each side).
MESSAGE_TIMEOUT_MS = 3000
PAUSE_S = 4.5
RESUME_BOUND_S = 1.0
INSTRUMENTS = 8
BACKLOG = 20_000  # quotes queued before a worker starts: it is busy producing when paused
PAUSE_AT = 1_000  # the publisher's and the relay's record during whose produce the broker stops
FEED_RATE_HZ = 400.0

Key = tuple[str, int]  # (instrument, seq)


@dataclass
class Target:
    """The broker a test runs against, and the embedded broker process when it may pause it."""

    bootstrap: str
    broker: EmbeddedBroker | None


@pytest.fixture(params=["steady", "paused"])
def target(request: pytest.FixtureRequest) -> Target:
    """The session broker (steady), or a broker of the test's own that it pauses (paused)."""
    if request.param == "paused":
        # Skips, saying why, when PRICING_HA_BOOTSTRAP names a broker we cannot SIGSTOP.
        broker: EmbeddedBroker = request.getfixturevalue("embedded_broker")
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
        relay=RelayConfig(
            session_timeout_ms=MESSAGE_TIMEOUT_MS, output_timeout_ms=MESSAGE_TIMEOUT_MS
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


@dataclass
class Deliveries:
    """Monotonic times of successful delivery callbacks, by producer ``client.id``."""

    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    factory: Callable[[dict[str, Any]], Any] = Producer
    """Builds a recording producer (for run_feed's producer_factory)."""
    produced: Counter[str] = field(default_factory=Counter)
    """Records handed to ``produce``, by ``client.id`` (every generation of its producer)."""
    before_produce: dict[str, Callable[[int], None]] = field(default_factory=dict)
    """Called with the record's number (from 1) before ``client.id`` produces it."""

    def count(self, client: str) -> int:
        """How many records ``client`` has seen acknowledged."""
        return len(self.times[client])

    def first_after(self, client: str, at: float) -> float | None:
        """When ``client`` first saw a record acknowledged after ``at``, if it has."""
        return next((t for t in list(self.times[client]) if t > at), None)


@pytest.fixture
def deliveries(monkeypatch: pytest.MonkeyPatch) -> Deliveries:
    """Records every producer's successful deliveries (the components' own producers too)."""
    seen = Deliveries()

    class RecordingProducer(Producer):
        """confluent-kafka's producer, noting when each delivery callback reports success."""

        def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
            super().__init__(config, **kwargs)
            self.client = str(config.get("client.id", "?"))
            self.times = seen.times[self.client]

        def produce(
            self,
            topic: str,
            *args: Any,
            on_delivery: Callable[..., None] | None = None,
            **kwargs: Any,
        ) -> None:
            client = self.client
            seen.produced[client] += 1
            hook = seen.before_produce.get(client)
            if hook is not None:
                hook(seen.produced[client])
            times = self.times

            def delivered(err: Any, msg: Any) -> None:
                if err is None:
                    times.append(time.monotonic())
                if on_delivery is not None:
                    on_delivery(err, msg)

            kwargs["on_delivery"] = delivered
            super().produce(topic, *args, **kwargs)

    # The publisher's and the relay's producers come from the ReplaceableProducer's default
    # factory, which builds pricing_ha.kafka.producers.Producer.
    monkeypatch.setattr(pricing_ha.kafka.producers, "Producer", RecordingProducer)
    seen.factory = RecordingProducer
    return seen


def pause_broker(target: Target) -> float:
    """SIGSTOP the broker for PAUSE_S; return the monotonic time of SIGCONT (always sent)."""
    assert target.broker is not None
    target.broker.pause()
    try:
        time.sleep(PAUSE_S)  # the fault itself, not a wait for a condition
    finally:
        target.broker.resume()
    return time.monotonic()


@dataclass
class MidBatchPause:
    """SIGSTOPs the broker from inside a component's ``produce`` call, so that the component
    is producing when the broker stops (a pause begun from the test's thread can fall between
    two batches of a component that flushes each one: it then has nothing in flight, and the
    pause tests nothing). SIGCONT follows PAUSE_S later, from a thread of its own."""

    broker: EmbeddedBroker
    sigcont: float | None = None
    _thread: threading.Thread | None = None
    _started: threading.Event = field(default_factory=threading.Event)

    def arm(self, deliveries: Deliveries, client: str, at: int) -> None:
        """Pause just before ``client`` produces its record number ``at``."""

        def hook(number: int) -> None:
            if number == at and self._thread is None:
                self.broker.pause()
                self._thread = threading.Thread(target=self._resume, name="sigcont")
                self._thread.start()
                self._started.set()

        deliveries.before_produce[client] = hook

    def _resume(self) -> None:
        try:
            time.sleep(PAUSE_S)  # the fault itself, not a wait for a condition
        finally:
            self.broker.resume()
            self.sigcont = time.monotonic()

    def wait(self) -> float:
        """Wait for the pause to start and end; return the monotonic time of SIGCONT."""
        wait_for(self._started.is_set, 60, "the component to produce", interval_s=0.01)
        assert self._thread is not None
        self._thread.join(PAUSE_S + 30)
        assert self.sigcont is not None, "the broker was not resumed"
        return self.sigcont

    def disarm(self) -> None:
        """Make sure the broker runs again (a test that failed before SIGCONT)."""
        if self._started.is_set() and self._thread is not None:
            self._thread.join(PAUSE_S + 30)
        self.broker.resume()


def assert_resumed_in_time(deliveries: Deliveries, client: str, sigcont: float) -> float:
    """Wait for ``client``'s first delivery after SIGCONT; fail if it came too late."""
    wait_for(
        lambda: deliveries.first_after(client, sigcont) is not None,
        30,
        f"{client} to deliver after SIGCONT",
        interval_s=0.05,
    )
    first = deliveries.first_after(client, sigcont)
    assert first is not None
    took = first - sigcont
    print(f"{client}: first delivery {took:.3f} s after SIGCONT")
    assert took <= RESUME_BOUND_S, f"{client} delivered again only {took:.3f} s after SIGCONT"
    return took


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
    """A relay replaces its wedged producer and rebuilds: prices has every seq once, in order."""
    want = expected_keys(feed_backlog(cfg, BACKLOG))
    publisher = publish(cfg, PublisherStats())
    try:
        wait_for_prices(cfg, cfg.topics.raw, want)
    finally:
        publisher.stop()
    stats = RelayStats()
    client = "relay-r1-prices"
    pause = None if target.broker is None else MidBatchPause(target.broker)
    if pause is not None:
        # Its first records are control records (a takeover marker per partition,
        # checkpoints); the PAUSE_AT-th is well inside the backlog's prices.
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
        assert stats.producer_replacements >= 1
    else:
        assert stats.producer_replacements == 0
    print(f"relay: {len(want)} prices, {stats.producer_replacements} replacements")
