"""Fetch pacing is opt-in: off by default, and the documented [broker.librdkafka] recipe
reaches every price-path consumer; the liveness reader waits like the others."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest
from confluent_kafka import Consumer

from pricing_ha.config import AppConfig, BrokerConfig
from pricing_ha.dedupe.liveness import Liveness, LivenessReader
from pricing_ha.dedupe.relay_clients import RelayClients, standby_settings
from pricing_ha.kafka.fetching import FETCH_WAIT_MS, PACING
from pricing_ha.publishing import quote_worker
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.telemetry import Telemetry

PACED = dataclasses.replace(AppConfig(), broker=BrokerConfig(librdkafka=dict(PACING)))


def _quote_consumer(cfg: AppConfig, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    class _Recorder:
        def __init__(self, settings: dict[str, Any], **_kw: Any) -> None:
            seen.append(settings)

    monkeypatch.setattr(quote_worker, "LookupConsumer", _Recorder)
    QuoteWorker(cfg, "p1", "a", lambda _p: True, PublisherStats(), telemetry=Telemetry.noop("t"))
    (settings,) = seen
    return settings


def _raw_consumer(cfg: AppConfig) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    def capture(settings: dict[str, Any]) -> Consumer:
        seen.append(settings)
        return cast(Consumer, object())

    RelayClients(consumer=capture).raw_consumer(cfg, "relay", "r1")
    (settings,) = seen
    return settings


def test_price_path_consumers_are_not_paced_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default no price-path consumer carries the pacing settings (they cost peak rate)."""
    for settings in (
        _quote_consumer(AppConfig(), monkeypatch),
        _raw_consumer(AppConfig()),
        standby_settings(AppConfig(), "r1"),
    ):
        assert not set(PACING) & set(settings)
        assert settings["fetch.wait.max.ms"] == FETCH_WAIT_MS


def test_pacing_in_the_librdkafka_table_reaches_every_price_path_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Set in [broker.librdkafka], the recipe reaches the publisher's quote consumer and the
    relay's input and standby tail."""
    for settings in (
        _quote_consumer(PACED, monkeypatch),
        _raw_consumer(PACED),
        standby_settings(PACED, "r1"),
    ):
        assert {k: settings[k] for k in PACING} == PACING


def test_liveness_reader_waits_like_the_other_idle_readers() -> None:
    """The liveness reader's idle fetch waits FETCH_WAIT_MS (it asked 50 times a second)."""
    reader = LivenessReader({"bootstrap.servers": "x"}, "t", Liveness("relay", "r1", 1.0))
    assert reader._settings["fetch.wait.max.ms"] == FETCH_WAIT_MS
