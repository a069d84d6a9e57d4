"""The feed's producing loop against a fake producer and a fake clock (no broker)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError

from pricing_ha.config import AppConfig
from pricing_ha.errors import ConfigError, TopicLayoutError
from pricing_ha.feed._sender import POLL_EVERY
from pricing_ha.feed.producer import run_configured_feed, run_feed, with_overrides
from pricing_ha.feed.sources import SyntheticMarket, default_symbols
from pricing_ha.publishing.quotes import Quote, parse_quote

CFG = AppConfig()


class FakeClock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        self.slept += seconds


class FakeProducer:
    """Records produce() calls; acknowledges (or fails) them on poll/flush."""

    def __init__(
        self,
        settings: dict[str, Any],
        partitions: int | None = 4,
        *,
        fail_seq: int | None = None,
        full_once: bool = False,
        clock: FakeClock | None = None,
        fail_code: int = KafkaError.MSG_SIZE_TOO_LARGE,
    ) -> None:
        self.settings = settings
        self.partitions = partitions
        self.fail_seq = fail_seq
        self.fail_code = fail_code
        self.full_once = full_once
        self.clock = clock
        self.sent: list[dict[str, Any]] = []
        self.pending: list[tuple[Callable[[Any, Any], None], bytes]] = []
        self.flushed = False
        self.polls = 0  # poll() calls by the code under test (not by flush)

    def produce(self, topic: str, **kwargs: Any) -> None:
        if self.full_once:
            self.full_once = False
            raise BufferError("queue full")
        self.sent.append({"topic": topic, "at": self.clock() if self.clock else 0.0, **kwargs})
        self.pending.append((kwargs["on_delivery"], kwargs["value"]))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return self._serve()

    def _serve(self) -> int:
        served = len(self.pending)
        for callback, value in self.pending:
            seq = orjson.loads(value)["seq"]
            err = KafkaError(self.fail_code) if seq == self.fail_seq else None
            callback(err, None)
        self.pending.clear()
        return served

    def flush(self, timeout: float) -> int:
        self.flushed = True
        self._serve()
        return 0

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        purged, self.pending = self.pending, []
        for callback, _ in purged:
            callback(KafkaError(KafkaError._PURGE_QUEUE), None)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        topics = {}
        if self.partitions is not None:
            topics[CFG.topics.quotes] = SimpleNamespace(
                partitions=dict.fromkeys(range(self.partitions)), error=None
            )
        return SimpleNamespace(topics=topics)


def quotes(n_instruments: int = 2) -> Any:
    """An endless synthetic quote stream with a fixed source time."""
    return SyntheticMarket(default_symbols(n_instruments), 1).quotes(lambda: 0)


def run(producer_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> tuple[Any, Any]:
    """Runs the feed with a fake producer; returns (summary, producer)."""
    made: list[FakeProducer] = []
    clock = kwargs.pop("clock", FakeClock())

    def factory(settings: dict[str, Any]) -> FakeProducer:
        made.append(FakeProducer(settings, clock=clock, **(producer_kwargs or {})))
        return made[0]

    source = kwargs.pop("source", quotes())
    sleep = kwargs.pop("sleep", clock.sleep)
    summary = run_feed(CFG, source, clock=clock, sleep=sleep, producer_factory=factory, **kwargs)
    return summary, made[0]


def test_producer_settings_and_keying() -> None:
    """Quotes are keyed by instrument, never given a partition, with safe producer settings."""
    summary, producer = run(rate_hz=0, count=10)
    assert producer.settings["acks"] == "all"
    assert producer.settings["enable.idempotence"] is True
    assert producer.settings["partitioner"] == "murmur2_random"
    assert producer.settings["linger.ms"] == 5
    assert producer.flushed
    for call in producer.sent:
        assert "partition" not in call
        assert call["topic"] == "md.quotes"
        assert parse_quote(call["value"], call["key"].encode()).instrument == call["key"]
    assert summary.delivered == 10
    assert summary.ok


def test_count_limits_total_quotes() -> None:
    """--count stops after exactly N quotes."""
    summary, producer = run(rate_hz=0, count=7)
    assert len(producer.sent) == 7
    assert summary.produced == 7


def test_pacing_follows_an_absolute_schedule() -> None:
    """At 100 quotes/s, quote i is sent at i/100 s, without drift."""
    summary, producer = run(rate_hz=100.0, count=50)
    times = [call["at"] for call in producer.sent]
    assert times == pytest.approx([i / 100 for i in range(50)], abs=1e-9)
    assert summary.produced == 50


def test_at_a_high_rate_the_feed_waits_once_per_handful_of_quotes_never_far_ahead() -> None:
    """At 50,000/s (20 µs apart) a quote due within 0.2 ms goes at once: the feed sleeps about
    once per ten quotes, not per quote, and never sends one more than 0.2 ms early."""
    clock = FakeClock()
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.sleep(seconds)

    summary, producer = run(rate_hz=50_000.0, count=5_000, clock=clock, sleep=sleep)
    assert summary.produced == 5_000
    early = [i / 50_000 - call["at"] for i, call in enumerate(producer.sent)]
    assert max(early) <= 0.0002 + 1e-9
    assert len(sleeps) <= 5_000 / 8


def test_duration_limits_the_run() -> None:
    """--duration stops before the first quote due at or after the limit."""
    summary, _ = run(rate_hz=10.0, duration_s=1.0)
    assert summary.produced == 10


def test_duration_limits_an_unpaced_run_by_elapsed_time() -> None:
    """Without pacing, --duration still ends the run once that much time has passed."""
    clock = FakeClock()

    def tick() -> int:
        clock.now += 0.01  # each generated quote takes 10 ms of (fake) time
        return 0

    source = SyntheticMarket(["A"], 1).quotes(tick)
    summary, _ = run(rate_hz=0, duration_s=1.0, clock=clock, source=source)
    assert 95 <= summary.produced <= 100


def test_stop_request_ends_the_run() -> None:
    """should_stop() turning True ends the loop gracefully, with a flush."""
    polls = itertools.count()
    summary, producer = run(rate_hz=0, should_stop=lambda: next(polls) >= 6)
    assert 0 < summary.produced < 10
    assert producer.flushed
    assert summary.ok


def test_delivery_failure_stops_the_feed() -> None:
    """The first failed delivery ends the run, within one batch of callbacks, and is reported."""
    summary, _ = run({"fail_seq": 3}, rate_hz=0, count=100, source=quotes(1))
    assert summary.failed == 1
    assert summary.produced <= 3 + POLL_EVERY
    assert not summary.ok
    assert "seq 3" in summary.errors[0]


def test_wedged_producer_is_replaced_and_unacknowledged_quotes_resent_first() -> None:
    """A timed-out quote replaces the producer; pending quotes go again, in order, before new."""
    made: list[FakeProducer] = []

    def factory(settings: dict[str, Any]) -> FakeProducer:
        first = not made  # only the first producer times a quote out
        made.append(
            FakeProducer(
                settings, fail_seq=3 if first else None, fail_code=KafkaError._MSG_TIMED_OUT
            )
        )
        return made[-1]

    clock = FakeClock()
    summary = run_feed(
        CFG, quotes(1), rate_hz=0, count=40, clock=clock, sleep=clock.sleep,
        producer_factory=factory,
    )  # fmt: skip
    assert len(made) == 2
    assert summary.ok
    assert (summary.delivered, summary.failed) == (40, 0)
    assert summary.producer_replacements == 1
    assert "producer replaced 1 times" in summary.render()
    assert orjson.loads(summary.to_json())["producer_replacements"] == 1
    seqs = [[orjson.loads(c["value"])["seq"] for c in p.sent] for p in made]
    # The timeout is seen at the first poll, after POLL_EVERY quotes; then 3 goes first.
    first = list(range(1, POLL_EVERY + 1))
    assert seqs == [first, [3, *range(POLL_EVERY + 1, 41)]]


def test_unpaced_the_feed_polls_once_per_batch_of_quotes_not_per_quote() -> None:
    """Behind its schedule (here: unpaced) the feed serves callbacks once per 16 quotes."""
    summary, producer = run(rate_hz=0, count=1600)
    assert summary.delivered == 1600
    assert producer.polls <= 1600 // 16 + 1


def test_paced_the_feed_polls_before_it_waits() -> None:
    """Ahead of its schedule the feed serves callbacks before each wait, so none waits long."""
    summary, producer = run(rate_hz=100.0, count=50)
    assert summary.delivered == 50
    assert producer.polls >= 49


def test_full_queue_is_retried() -> None:
    """A BufferError from a full local queue is retried, not lost."""
    summary, producer = run({"full_once": True}, rate_hz=0, count=5)
    assert len(producer.sent) == 5
    assert summary.delivered == 5


def test_missing_quotes_topic_is_a_layout_error() -> None:
    """The feed refuses to start without md.quotes."""
    with pytest.raises(TopicLayoutError, match="does not exist"):
        run({"partitions": None}, rate_hz=0, count=1)


def test_wrong_partition_count_is_a_layout_error() -> None:
    """The feed refuses to start when md.quotes has another partition count than M."""
    with pytest.raises(TopicLayoutError, match="has 3 partitions"):
        run({"partitions": 3}, rate_hz=0, count=1)


def test_replay_source_is_sent_in_file_order() -> None:
    """Any iterable of quotes is sent as given, including explicit source times."""
    source = [
        Quote(instrument="A", seq=5, bid=1.0, ask=1.1, source_time_ns=11),
        Quote(instrument="B", seq=1, bid=2.0, ask=2.1, source_time_ns=12),
    ]
    summary, producer = run(rate_hz=0, source=source)
    assert [orjson.loads(c["value"])["source_time_ns"] for c in producer.sent] == [11, 12]
    assert summary.instruments["A"].last_seq == 5


def test_run_configured_feed_validates_replay_before_sending(tmp_path: Path) -> None:
    """A bad row anywhere in the replay file stops the feed before anything is produced."""
    path = tmp_path / "bad.csv"
    path.write_text("A,1,1.0,1.1\nA,2,1.0,oops\n")
    made: list[str] = []
    with pytest.raises(Exception, match=r"bad.csv:2: ask is not a number"):
        run_configured_feed(CFG, replay=path, echo=made.append)
    assert made == []


def test_with_overrides_applies_and_validates_options() -> None:
    """--instruments/--rate/--seed replace config values; bad ones name the option."""
    cfg = with_overrides(CFG, instruments=3, rate_hz=5.0, seed=9)
    assert (cfg.feed.instruments, cfg.feed.rate_per_instrument_hz, cfg.feed.seed) == (3, 5.0, 9)
    assert with_overrides(CFG) == CFG
    with pytest.raises(ConfigError) as info:
        with_overrides(CFG, instruments=0)
    assert info.value.source == "command line"
    assert info.value.key == "feed.instruments"
