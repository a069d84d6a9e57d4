"""/metrics shows every role's price and defect counters at zero before the first price."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pricing_ha.config import AppConfig, TelemetryConfig, TopicsConfig
from pricing_ha.dedupe.output import RelayOutput
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.telemetry import Telemetry, setup_telemetry
from tests.unit.subscribing.test_subscriber import started
from tests.unit.telemetry.prometheus_format import parse, value

M = 3


def _telemetry(tmp_path: Path, role: str) -> Telemetry:
    cfg = AppConfig(telemetry=TelemetryConfig(traces_dir=tmp_path))
    return setup_telemetry(cfg, service_role=role, group=None, member="m", env={})


@pytest.fixture
def cfg() -> AppConfig:
    """M partitions; the broker is never contacted."""
    return AppConfig(topics=TopicsConfig(partitions=M))


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    """A process's telemetry, rendered as /metrics would."""
    tel = _telemetry(tmp_path, "test")
    yield tel
    tel.shutdown()


def test_publisher_counts_published_prices_from_zero(cfg: AppConfig, telemetry: Telemetry) -> None:
    """A publisher member's published series exist at 0 for every partition at start-up."""
    worker = QuoteWorker(cfg, "p1", "a", lambda _p: False, PublisherStats(), telemetry=telemetry)
    try:
        fams = parse(telemetry.prometheus_text())
    finally:
        worker.consumer.close()
    for p in range(M):
        assert value(fams, "pricing_ha_prices_published_total", group="p1", partition=str(p)) == 0


def test_relay_counts_relayed_duplicates_and_gaps_from_zero(
    cfg: AppConfig, telemetry: Telemetry
) -> None:
    """A relay member's relayed, duplicates and gaps series exist at 0 for every partition."""
    stats = RelayStats()
    producers = OutputProducers(cfg, "r1", "pricing.relay.raw", stats=stats)
    RelayOutput(
        cfg,
        "r1",
        "pricing.relay.raw",
        producers,
        lambda _p: False,
        stats=stats,
        telemetry=telemetry,
    )
    fams = parse(telemetry.prometheus_text())
    for p in map(str, range(M)):
        assert value(fams, "pricing_ha_prices_relayed_total", partition=p) == 0
        assert value(fams, "pricing_ha_duplicates_dropped_total", stage="relay", partition=p) == 0
        assert value(fams, "pricing_ha_seq_gaps_total", stage="relay", partition=p) == 0


async def test_subscriber_counts_deliveries_duplicates_and_gaps_from_zero(
    telemetry: Telemetry,
) -> None:
    """A subscriber's delivered, duplicates and gaps series exist at 0 before any delivery."""
    await started(telemetry=telemetry)  # on AppConfig(): the default M
    fams = parse(telemetry.prometheus_text())
    for p in map(str, range(AppConfig().topics.partitions)):
        assert value(fams, "pricing_ha_prices_delivered_total", partition=p) == 0
        assert (
            value(fams, "pricing_ha_duplicates_dropped_total", stage="subscriber", partition=p) == 0
        )
        assert value(fams, "pricing_ha_seq_gaps_total", stage="subscriber", partition=p) == 0


def test_latency_histograms_are_empty_until_the_first_price(telemetry: Telemetry) -> None:
    """A role's latency histograms exist from start-up with every bucket at 0; the first
    measurement replaces the empty series (one series per stage, never two)."""
    from pricing_ha.telemetry.tally import PriceTally

    tally = PriceTally(telemetry.metrics, telemetry.metrics.prices_relayed, stage="relay")
    tally.declare(range(M))
    fams = parse(telemetry.prometheus_text())
    for name in ("pricing_ha_price_latency_seconds", "pricing_ha_price_hop_latency_seconds"):
        assert value(fams, f"{name}_count", stage="relay") == 0
        assert value(fams, f"{name}_sum", stage="relay") == 0
        assert value(fams, f"{name}_bucket", stage="relay", le="+Inf") == 0
    tally.add(0, "EURUSD", 0.02, 0.01)
    tally.flush()
    fams = parse(telemetry.prometheus_text())
    for name in ("pricing_ha_price_latency_seconds", "pricing_ha_price_hop_latency_seconds"):
        assert value(fams, f"{name}_count", stage="relay") == 1
        assert value(fams, f"{name}_bucket", stage="relay", le="+Inf") == 1
