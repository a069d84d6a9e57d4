"""Bounded per-instrument state: the ``[limits]`` configuration, the publisher's seq guard,
checkpoints that fit a record, rate-limited warnings (issue 45, item 5)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Producer

from pricing_ha.config import AppConfig, BrokerConfig, LimitsConfig, load_config
from pricing_ha.dedupe.control import PartitionView
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.errors import ConfigError
from pricing_ha.publishing.quotes import SequenceGuard
from pricing_ha.subscribing.subscriber import Subscriber
from pricing_ha.telemetry.ratelimited import RateLimitedWarnings
from tests.unit.kafka.producer_fakes import Clock
from tests.unit.subscribing.test_subscriber import FakeConsumer, raw


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "limits.toml"
    path.write_text(text)
    return path


def _config_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.source == str(path)
    assert info.value.key == "limits.max_instruments_per_partition"
    return info.value


def test_limits_load_from_toml_and_bad_values_name_file_key_and_problem(tmp_path: Path) -> None:
    """[limits] keys load; a bad one is an error naming the file, the dotted key and why."""
    ok = _write(tmp_path, "[limits]\nmax_instruments_per_partition = 50\nwarn_interval_ms = 500\n")
    cfg = load_config(ok, {})
    assert cfg.limits == LimitsConfig(max_instruments_per_partition=50, warn_interval_ms=500)
    bad = _write(tmp_path, "[limits]\nmax_instruments_per_partition = 0\n")
    assert "must be 1..10000000" in _config_error(bad).problem


def test_a_limit_whose_checkpoints_cannot_fit_a_record_is_refused(tmp_path: Path) -> None:
    """More instruments than a checkpoint record can hold is a configuration error, unless
    message.max.bytes is raised to match."""
    path = _write(tmp_path, "[limits]\nmax_instruments_per_partition = 20000\n")
    assert "message.max.bytes" in _config_error(path).problem
    raised = _write(
        tmp_path,
        "[limits]\nmax_instruments_per_partition = 20000\n"
        '[broker.librdkafka]\n"message.max.bytes" = "3000000"\n',
    )
    assert load_config(raised, {}).limits.max_instruments_per_partition == 20000
    odd = _write(tmp_path, '[broker.librdkafka]\n"message.max.bytes" = "lots"\n')
    with pytest.raises(ConfigError) as info:
        load_config(odd, {})
    assert (info.value.source, info.value.key) == (str(odd), "broker.librdkafka.message.max.bytes")


def test_per_instrument_metrics_are_opt_in(tmp_path: Path) -> None:
    """The per-instrument staleness gauge is off unless the configuration turns it on."""
    assert not AppConfig().telemetry.per_instrument_metrics
    cfg = load_config(_write(tmp_path, "[telemetry]\nper_instrument_metrics = true\n"), {})
    assert cfg.telemetry.per_instrument_metrics


def test_the_seq_guard_forgets_the_least_recently_quoted_past_its_limit() -> None:
    """A flood of new names evicts the least recently quoted instrument, never grows past the
    limit, and a live instrument keeps its check."""
    guard = SequenceGuard(limit=3)
    assert guard.check("EURUSD", 5).ok
    for i in range(200_000):
        guard.check(f"FLOOD{i}", 1)
        if i % 2 == 0:
            assert guard.check("EURUSD", 6 + i // 2).ok  # quoted often: never the oldest
    assert len(guard) == 3
    assert guard.evicted == 200_000 + 1 - 3
    last = guard.last("EURUSD")
    assert last is not None
    assert not guard.check("EURUSD", last).ok  # a repeat of a live instrument is still refused
    assert guard.last("FLOOD0") is None  # forgotten: its next quote counts as its first


class _UntransactedProducer:
    """A real librdkafka producer (it raises on a record over message.max.bytes) whose
    transactions need no broker: they always begin and commit."""

    def __init__(self, config: dict[str, Any]) -> None:
        """The real producer, from ``config`` without its transactional settings."""
        self._real = Producer({k: v for k, v in config.items() if not k.startswith("transaction")})

    def produce(self, *args: Any, **kwargs: Any) -> None:
        """Produce through the real producer."""
        self._real.produce(*args, **kwargs)

    def init_transactions(self, timeout: float = 0) -> None:
        """Nobody to fence."""

    def begin_transaction(self) -> None:
        """Begin a transaction."""

    def purge(self, *args: Any, **kwargs: Any) -> None:
        """Purge the real producer's queue."""
        self._real.purge(*args, **kwargs)

    def poll(self, timeout: float = 0) -> int:
        """Serve the real producer's callbacks."""
        return self._real.poll(timeout)


def test_a_checkpoint_larger_than_a_record_is_skipped_not_raised() -> None:
    """A view too big for message.max.bytes is not produced (librdkafka would raise
    MSG_SIZE_TOO_LARGE and the relay would crash-loop): it is counted and skipped."""
    cfg = AppConfig(
        broker=BrokerConfig(librdkafka={"message.max.bytes": "100000"}),
        limits=LimitsConfig(max_instruments_per_partition=900),
    )
    stats = RelayStats()
    producers = OutputProducers(
        cfg,
        "r1",
        "pricing.relay.raw",
        stats=stats,
        producer_factory=lambda c: cast(Producer, _UntransactedProducer(c)),
    )
    producers.fences.fence([0], 1.0)  # the partition's own producer, as a takeover gives it
    writer = ControlWriter(cfg, "r1", producers, stats=stats)
    view = PartitionView(position=1, high={f"I{i:07d}": 2**62 for i in range(20_000)})
    big = view.encode()
    assert len(big) > 100_000
    writer.checkpoint(0, big)  # a real producer: this raised before
    assert stats.checkpoints_skipped == 1
    assert stats.checkpoints == 0
    small = PartitionView(position=1, high={"EURUSD": 3}).encode()
    writer.checkpoint(0, small)
    assert stats.checkpoints == 1


def test_warnings_of_a_kind_are_rate_limited_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    """One warning per kind per interval; the ones held back are counted in the next."""
    clock = Clock()
    warnings = RateLimitedWarnings(logging.getLogger("t.rate"), 10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t.rate"):
        assert warnings.warn("a", "refused %s", "X1")
        for i in range(1000):
            assert not warnings.warn("a", "refused %s", f"Y{i}")
        assert warnings.warn("b", "other")
        clock.now = 10.0
        assert warnings.warn("a", "refused %s", "Z")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused X1",
        "other",
        "refused Z (and 1000 more like it since the last such warning)",
    ]


async def test_a_direct_subscriber_refuses_new_instruments_past_the_limit() -> None:
    """A flood of names on prices.raw fills the direct subscriber's arbiter only up to
    partitions x the per-partition limit; known instruments keep being delivered."""
    cfg = AppConfig(limits=LimitsConfig(max_instruments_per_partition=5))
    fake = FakeConsumer(cfg.topics.raw, partitions=cfg.topics.partitions)
    sub = Subscriber(cfg, direct=True, consumer_factory=lambda _c: fake)
    await sub.start()
    fake.batches = [[raw("EURUSD", 1), *(raw(f"F{i}", 1) for i in range(100)), raw("EURUSD", 2)]]
    got = await sub.poll(0.1)
    limit = cfg.topics.partitions * 5
    assert sub.arbiter.instrument_count() == limit
    assert sub.stats.invalid == 100 - (limit - 1)
    assert [d.seq for d in got if d.instrument == "EURUSD"] == [1, 2]
    await sub.close()
