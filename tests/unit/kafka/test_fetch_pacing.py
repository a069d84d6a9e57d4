"""The price path's consumers pace their fetches; the liveness reader and the user's table keep
their say."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest
from confluent_kafka import Consumer

from pricing_ha.config import AppConfig, BrokerConfig
from pricing_ha.dedupe.liveness import Liveness, LivenessReader
from pricing_ha.dedupe.relay_clients import RelayClients, standby_settings
from pricing_ha.kafka.fetching import FETCH_PACE_MS, FETCH_WAIT_MS, PACED_FETCH
from pricing_ha.publishing import quote_worker
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.telemetry import Telemetry


def _paced(settings: dict[str, Any]) -> bool:
    return all(settings.get(key) == value for key, value in PACED_FETCH.items())


def test_paced_fetch_backs_off_after_every_fetch_that_returned_records() -> None:
    """One queued record is enough to hold the next fetch back FETCH_PACE_MS; the idle wait
    stays FETCH_WAIT_MS."""
    assert PACED_FETCH["queued.min.messages"] == 1
    assert PACED_FETCH["fetch.queue.backoff.ms"] == FETCH_PACE_MS
    assert 0 < FETCH_PACE_MS < FETCH_WAIT_MS
    assert PACED_FETCH["fetch.wait.max.ms"] == FETCH_WAIT_MS


def test_publishers_quote_consumer_is_paced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The publisher's md.quotes consumer is built with the pacing settings."""
    seen: list[dict[str, Any]] = []

    class _Recorder:
        def __init__(self, settings: dict[str, Any], **_kw: Any) -> None:
            seen.append(settings)

    monkeypatch.setattr(quote_worker, "Consumer", _Recorder)
    QuoteWorker(
        AppConfig(), "p1", "a", lambda _p: True, PublisherStats(), telemetry=Telemetry.noop("t")
    )
    (settings,) = seen
    assert _paced(settings)


def test_relays_input_and_standby_tail_are_paced() -> None:
    """The relay's prices.raw consumer and its standby reader of prices are paced."""
    seen: list[dict[str, Any]] = []

    def capture(settings: dict[str, Any]) -> Consumer:
        seen.append(settings)
        return cast(Consumer, object())

    RelayClients(consumer=capture).raw_consumer(AppConfig(), "relay", "r1")
    (raw,) = seen
    assert _paced(raw)
    assert _paced(standby_settings(AppConfig(), "r1"))


def test_users_librdkafka_table_overrides_the_pace() -> None:
    """A pace in the user's [broker.librdkafka] table wins over the default."""
    cfg = dataclasses.replace(
        AppConfig(), broker=BrokerConfig(librdkafka={"fetch.queue.backoff.ms": "25"})
    )
    assert standby_settings(cfg, "r1")["fetch.queue.backoff.ms"] == "25"


def test_liveness_reader_waits_like_the_other_idle_readers() -> None:
    """The liveness reader's idle fetch waits FETCH_WAIT_MS (it asked 50 times a second)."""
    reader = LivenessReader({"bootstrap.servers": "x"}, "t", Liveness("relay", "r1", 1.0))
    assert reader._settings["fetch.wait.max.ms"] == FETCH_WAIT_MS
