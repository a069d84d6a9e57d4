"""The sections of pricing-ha's configuration, one frozen dataclass per TOML table.

Each class validates itself in ``__post_init__`` (ranges, and the cross-field timing rules of
docs/architecture.md, "Timing") and raises :class:`~pricing_ha.errors.ConfigError` keyed to
its own table; the loader in :mod:`pricing_ha.config` re-anchors it at the file and full dotted key.
Import these names from :mod:`pricing_ha.config`.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from pricing_ha.errors import ConfigError

__all__ = [
    "FeedConfig",
    "HealthConfig",
    "InstrumentOverride",
    "PricingConfig",
    "SequenceConfig",
    "TelemetryConfig",
    "TopicsConfig",
]

# Kafka's legal topic names: up to 249 of [a-zA-Z0-9._-], and not "." or "..".
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check(ok: bool, owner: object, key: str, problem: str) -> None:
    if not ok:
        raise ConfigError(type(owner).__name__, key, problem)


def check_ms(owner: object, key: str, value: int, minimum: int = 1) -> None:
    check(value >= minimum, owner, key, f"must be at least {minimum} ms, got {value}")


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicsConfig:
    """Topic names and layout (docs/architecture.md, "Topics and partitioning").

    All topics get the same partition count.

    Attributes:
        quotes: market-data input, keyed by instrument. Default ``"md.quotes"``.
        neli: the NELI heartbeat topic shared by both groups. Default ``"pricing.neli"``.
        raw: prices from every leader of both groups. Default ``"prices.raw"``.
        prices: the deduplicated prices subscribers read. Default ``"prices"``.
        dlq: rejected quotes with a reason header. Default ``"md.quotes.dlq"``.
        raw_dlq: rejected raw prices (relay). Default ``"prices.raw.dlq"``.
        partitions: M, the partition count of every topic. Default 4.
        replication_factor: replicas per partition (1 on a one-node broker, 3 on a real
            cluster). Default 1.
        neli_retention_ms: ``retention.ms`` of the NELI topic; heartbeats are useless once
            stale. Default 60000.
    """

    quotes: str = "md.quotes"
    neli: str = "pricing.neli"
    raw: str = "prices.raw"
    prices: str = "prices"
    dlq: str = "md.quotes.dlq"
    raw_dlq: str = "prices.raw.dlq"
    partitions: int = 4
    replication_factor: int = 1
    neli_retention_ms: int = 60_000

    def __post_init__(self) -> None:
        for name, topic in self.by_role().items():
            check(
                _TOPIC_NAME.fullmatch(topic) is not None and topic not in {".", ".."},
                self,
                name,
                f"{topic!r} is not a legal Kafka topic name",
            )
        names = list(self.by_role().values())
        dupes = sorted({n for n in names if names.count(n) > 1})
        check(not dupes, self, "quotes", f"topic names must be distinct; repeated: {dupes}")
        check(self.partitions >= 1, self, "partitions", "must be at least 1")
        check(self.replication_factor >= 1, self, "replication_factor", "must be at least 1")
        check_ms(self, "neli_retention_ms", self.neli_retention_ms, 1000)

    def by_role(self) -> dict[str, str]:
        """Returns ``{role: topic name}`` for all six topics, in pipeline order."""
        return {
            "quotes": self.quotes,
            "neli": self.neli,
            "raw": self.raw,
            "prices": self.prices,
            "dlq": self.dlq,
            "raw_dlq": self.raw_dlq,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class FeedConfig:
    """The synthetic market-data feed (``pricing-ha feed``).

    Attributes:
        instruments: how many instruments to simulate when ``symbols`` is not set. Default 20.
        rate_per_instrument_hz: quotes per second per instrument; 0 means as fast as possible.
            Default 20.0.
        seed: random seed; the quote sequence is a pure function of it. Default 42.
        symbols: explicit instrument symbols; when set, ``instruments`` is ignored. Default
            unset (generated: EURUSD-like pairs, then SYM001, SYM002, ...).
        epoch_ms: the epoch stamped on every quote (docs/architecture.md, "Sequence epochs").
            Default unset: the feed's start time in Unix milliseconds, so a restart starts a
            new, larger epoch. Set it only to replay or test a given epoch.
    """

    instruments: int = 20
    rate_per_instrument_hz: float = 20.0
    seed: int = 42
    symbols: tuple[str, ...] | None = None
    epoch_ms: int | None = None

    def __post_init__(self) -> None:
        check(1 <= self.instruments <= 100_000, self, "instruments", "must be 1..100000")
        check(self.rate_per_instrument_hz >= 0, self, "rate_per_instrument_hz", "must be >= 0")
        if self.epoch_ms is not None:
            check(0 <= self.epoch_ms <= 2**63 - 1, self, "epoch_ms", "must be in 0..2^63-1")
        if self.symbols is not None:
            check(bool(self.symbols), self, "symbols", "must not be empty when set")
            check(all(s.strip() for s in self.symbols), self, "symbols", "blank symbol")
            check(len(set(self.symbols)) == len(self.symbols), self, "symbols", "duplicates")


@dataclass(frozen=True, kw_only=True, slots=True)
class SequenceConfig:
    """Bounds on how far one record may move an instrument's ``(epoch, seq)`` on its own word.

    Publishers (:class:`pricing_ha.publishing.quotes.SequenceGuard`) and the relay
    (:mod:`pricing_ha.dedupe.arbitration`) both apply them; see docs/architecture.md,
    "Sequence epochs".

    Attributes:
        max_seq_jump: the largest forward step in ``seq`` within an epoch (a new epoch steps
            from 0) accepted without confirmation. Default 10000.
        max_epoch_skew_ms: how far an epoch (the feed's start time) may be ahead of the
            reader's clock. Default 60000.
    """

    max_seq_jump: int = 10_000
    max_epoch_skew_ms: int = 60_000

    def __post_init__(self) -> None:
        check(1 <= self.max_seq_jump <= 2**62, self, "max_seq_jump", "must be in 1..2^62")
        check_ms(self, "max_epoch_skew_ms", self.max_epoch_skew_ms, minimum=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class InstrumentOverride:
    """Per-instrument pricing parameters; unset fields fall back to ``[pricing]``.

    Attributes:
        spread_bps: minimum quoted spread in basis points of mid. Default unset.
        skew_bps: shift of mid in basis points (positive raises both sides). Default unset.
        tick_size: price increment, as a decimal (``"0.001"`` or ``0.001``). Default unset.
    """

    spread_bps: float | None = None
    skew_bps: float | None = None
    tick_size: Decimal | None = None

    def __post_init__(self) -> None:
        if self.spread_bps is not None:
            check(0 <= self.spread_bps < 10_000, self, "spread_bps", "must be in [0, 10000)")
        if self.skew_bps is not None:
            check(abs(self.skew_bps) < 10_000, self, "skew_bps", "must be in (-10000, 10000)")
        if self.tick_size is not None:
            check(self.tick_size > 0, self, "tick_size", f"must be > 0, got {self.tick_size}")


@dataclass(frozen=True, kw_only=True, slots=True)
class PricingConfig:
    """Parameters of the pure pricing function (``pricing_ha.publishing.pricing``).

    Attributes:
        spread_bps: minimum quoted spread in basis points of mid. Default 2.0.
        skew_bps: shift of mid in basis points. Default 0.0.
        tick_size: price increment (bid rounds down, ask up). Default 0.00001.
        instruments: per-symbol overrides, ``[pricing.instruments.EURUSD]``. Default none.
    """

    spread_bps: float = 2.0
    skew_bps: float = 0.0
    tick_size: Decimal = Decimal("0.00001")
    instruments: Mapping[str, InstrumentOverride] = field(
        default_factory=lambda: types.MappingProxyType({})
    )

    def __post_init__(self) -> None:
        check(0 <= self.spread_bps < 10_000, self, "spread_bps", "must be in [0, 10000)")
        check(abs(self.skew_bps) < 10_000, self, "skew_bps", "must be in (-10000, 10000)")
        check(self.tick_size > 0, self, "tick_size", f"must be > 0, got {self.tick_size}")
        object.__setattr__(self, "instruments", types.MappingProxyType(dict(self.instruments)))


@dataclass(frozen=True, kw_only=True, slots=True)
class HealthConfig:
    """Where long-running processes serve ``/healthz``, ``/readyz`` and ``/metrics``.

    Attributes:
        host: bind address. Default ``"127.0.0.1"`` (use ``"0.0.0.0"`` in containers).
        publisher_port: port of ``pricing-ha run``; 0 picks a free port. Default 0.
        relay_port: port of ``pricing-ha dedupe``; 0 picks a free port. Default 0.
        subscriber_port: port of ``pricing-ha subscribe``; 0 picks a free port. Default 0.
    """

    host: str = "127.0.0.1"
    publisher_port: int = 0
    relay_port: int = 0
    subscriber_port: int = 0

    def __post_init__(self) -> None:
        check(bool(self.host.strip()), self, "host", "must not be empty")
        for name in ("publisher_port", "relay_port", "subscriber_port"):
            port = getattr(self, name)
            check(0 <= port <= 65_535, self, name, f"must be 0..65535, got {port}")


@dataclass(frozen=True, kw_only=True, slots=True)
class TelemetryConfig:
    """OpenTelemetry settings (docs/architecture.md, "Observability").

    Attributes:
        az: availability zone reported as ``cloud.availability_zone``. Default ``"local"``.
        otlp_endpoint: OTLP/HTTP endpoint; ``OTEL_EXPORTER_OTLP_ENDPOINT`` also works. Default
            unset (traces go to JSON-lines files in ``traces_dir``).
        traces_dir: directory for local trace files, relative to the working directory.
            Default ``out/traces``.
        price_sample_ratio: share of price-path traces (``send``/``process`` spans of price
            messages) that are sampled, 0..1; leadership and fail-over spans are always
            recorded. Default 0.01.
        per_instrument_metrics: also export the per-instrument staleness gauge (label
            ``instrument``: one series per instrument ever seen, so opt in only with a known,
            bounded set of instruments). Default ``False``: staleness per partition only.
        kafka_stats_interval_ms: librdkafka's ``statistics.interval.ms`` for the publishers'
            and the relay's clients, exported as metrics (consumer lag, producer queues,
            broker round-trip times: :mod:`pricing_ha.telemetry.kafka_stats`); 0 turns them
            off, else 100 ms to 1 hour. Default 5000.
        json_logs: write log records as JSON objects (one a line) carrying ``trace_id`` and
            ``span_id`` when logged inside a span (:mod:`pricing_ha.telemetry.json_logs`);
            ``--json-logs`` also sets it. Default ``False`` (plain text).
    """

    az: str = "local"
    otlp_endpoint: str | None = None
    traces_dir: Path = Path("out/traces")
    price_sample_ratio: float = 0.01
    per_instrument_metrics: bool = False
    kafka_stats_interval_ms: int = 5_000
    json_logs: bool = False

    def __post_init__(self) -> None:
        check(bool(self.az.strip()), self, "az", "must not be empty")
        check(
            self.kafka_stats_interval_ms == 0 or 100 <= self.kafka_stats_interval_ms <= 3_600_000,
            self,
            "kafka_stats_interval_ms",
            f"must be 0 (off) or 100..3600000 ms, got {self.kafka_stats_interval_ms}",
        )
        check(
            0.0 <= self.price_sample_ratio <= 1.0,
            self,
            "price_sample_ratio",
            f"must be between 0 and 1, got {self.price_sample_ratio}",
        )
        if self.otlp_endpoint is not None:
            check(
                self.otlp_endpoint.startswith(("http://", "https://")),
                self,
                "otlp_endpoint",
                f"must be an http(s) URL, got {self.otlp_endpoint!r}",
            )
