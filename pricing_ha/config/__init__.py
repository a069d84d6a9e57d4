"""pricing-ha configuration: typed, validated, loaded from TOML with environment overrides.

Every option has a default, documented on its section's dataclass (``_broker.py``,
``_sections.py`` and ``_roles.py``, all re-exported here) and in ``config/default.toml``, which
spells out exactly these defaults for the local Apache Kafka (``pricing-ha broker``). Loading
order, later wins:

1. the built-in defaults below;
2. the TOML file (``--config``, else ``$PRICING_HA_CONFIG``, else the repository's
   ``config/default.toml`` when present);
3. ``PRICING_HA__SECTION__KEY=value`` environment variables (case-insensitive section and key,
   parsed by the field's type; ``PRICING_HA__BROKER__LIBRDKAFKA__SSL_CA_LOCATION`` sets the
   librdkafka property ``ssl.ca.location``;
   ``PRICING_HA__PRICING__INSTRUMENTS__EURUSD__SPREAD_BPS`` sets one instrument's override);
4. ``PRICING_HA_BOOTSTRAP`` (broker bootstrap servers);
5. a command's ``--bootstrap`` option.

Unknown keys, wrong types and inconsistent timings are errors (:class:`ConfigError` naming the
file or variable, the dotted key and the problem); a running system never guesses.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pricing_ha.config._broker import CONSUMER_RECOVERY_DEFAULTS, RECOVERY_DEFAULTS, BrokerConfig
from pricing_ha.config._java_client import java_client_properties
from pricing_ha.config._limits import MAX_INSTRUMENT_BYTES, LimitsConfig, message_max_bytes
from pricing_ha.config._parse import EnvText, apply_env, convert_table, set_env_value
from pricing_ha.config._roles import (
    GroupsConfig,
    PublisherNeliConfig,
    RelayConfig,
    SubscriberConfig,
)
from pricing_ha.config._scram import authentication_failure
from pricing_ha.config._sections import (
    FeedConfig,
    HealthConfig,
    InstrumentOverride,
    PricingConfig,
    SequenceConfig,
    TelemetryConfig,
    TopicsConfig,
)
from pricing_ha.errors import ConfigError

__all__ = [
    "CONSUMER_RECOVERY_DEFAULTS",
    "ENV_BOOTSTRAP",
    "ENV_CONFIG",
    "ENV_PREFIX",
    "MAX_INSTRUMENT_BYTES",
    "RECOVERY_DEFAULTS",
    "AppConfig",
    "BrokerConfig",
    "FeedConfig",
    "GroupsConfig",
    "HealthConfig",
    "InstrumentOverride",
    "LimitsConfig",
    "PricingConfig",
    "PublisherNeliConfig",
    "RelayConfig",
    "SequenceConfig",
    "SubscriberConfig",
    "TelemetryConfig",
    "TopicsConfig",
    "authentication_failure",
    "default_config_path",
    "java_client_properties",
    "load_app_config",
    "load_config",
    "message_max_bytes",
]

ENV_PREFIX = "PRICING_HA__"
ENV_BOOTSTRAP = "PRICING_HA_BOOTSTRAP"
ENV_CONFIG = "PRICING_HA_CONFIG"


@dataclass(frozen=True, kw_only=True, slots=True)
class AppConfig:
    """The whole application configuration: one attribute per TOML section."""

    broker: BrokerConfig = field(default_factory=BrokerConfig)
    topics: TopicsConfig = field(default_factory=TopicsConfig)
    groups: GroupsConfig = field(default_factory=GroupsConfig)
    neli: PublisherNeliConfig = field(default_factory=PublisherNeliConfig)
    relay: RelayConfig = field(default_factory=RelayConfig)
    feed: FeedConfig = field(default_factory=FeedConfig)
    pricing: PricingConfig = field(default_factory=PricingConfig)
    sequence: SequenceConfig = field(default_factory=SequenceConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    subscriber: SubscriberConfig = field(default_factory=SubscriberConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)

    def __post_init__(self) -> None:
        slowest = max(self.neli.threshold_ms, self.relay.session_timeout_ms)
        if self.topics.neli_retention_ms <= slowest:
            raise ConfigError(
                "AppConfig",
                "topics.neli_retention_ms",
                f"must exceed neli.threshold_ms and relay.session_timeout_ms ({slowest} ms)",
            )
        most = message_max_bytes(self.broker)
        if self.limits.checkpoint_bytes() > most:
            raise ConfigError(
                "AppConfig",
                "limits.max_instruments_per_partition",
                f"{self.limits.max_instruments_per_partition} instruments need checkpoints of "
                f"up to {self.limits.checkpoint_bytes()} bytes, more than the producers' "
                f"message.max.bytes ({most}): lower it, or raise broker.librdkafka."
                "message.max.bytes (and the topic's max.message.bytes)",
            )


def _read_toml(path: Path) -> dict[str, object]:
    source = str(path)
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(source, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"line {match[1]}" if match else "(syntax)"
        problem = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        column = f" (column {match[2]})" if match else ""
        raise ConfigError(source, where, f"invalid TOML: {problem}{column}") from exc


def load_config(path: Path | None = None, env: Mapping[str, str] = os.environ) -> AppConfig:
    """Loads and validates the configuration.

    Args:
        path: a TOML file, or ``None`` for the built-in defaults.
        env: the environment, for ``PRICING_HA__...`` and ``PRICING_HA_BOOTSTRAP`` overrides.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: naming the file (or variable), the dotted key and the problem.
    """
    raw = _read_toml(path) if path is not None else {}
    apply_env(raw, AppConfig, env, prefix=ENV_PREFIX)
    bootstrap = env.get(ENV_BOOTSTRAP, "")
    if bootstrap:
        set_env_value(raw, ["broker", "bootstrap_servers"], EnvText(bootstrap, ENV_BOOTSTRAP))
    source = str(path) if path is not None else "built-in defaults"
    return convert_table(AppConfig, raw, key="", source=source)


def default_config_path() -> Path | None:
    """Returns the repository's ``config/default.toml`` if this is a source checkout."""
    # This file is pricing_ha/config/__init__.py: the repository root is three levels up.
    candidate = Path(__file__).resolve().parents[2] / "config" / "default.toml"
    return candidate if candidate.is_file() else None


def load_app_config(
    config: Path | None = None,
    *,
    bootstrap: str | None = None,
    env: Mapping[str, str] = os.environ,
) -> AppConfig:
    """Loads the configuration the way every command does.

    Args:
        config: the ``--config`` option; else ``$PRICING_HA_CONFIG``; else
            :func:`default_config_path` (which falls back to the built-in defaults).
        bootstrap: the ``--bootstrap`` option; overrides every other bootstrap setting.
        env: the environment.

    Raises:
        ConfigError: if the configuration is invalid.
    """
    path = config or (Path(env[ENV_CONFIG]) if env.get(ENV_CONFIG) else default_config_path())
    cfg = load_config(path, env)
    if bootstrap is None:
        return cfg
    if not bootstrap.strip():
        raise ConfigError("option --bootstrap", "broker.bootstrap_servers", "must not be empty")
    broker = dataclasses.replace(cfg.broker, bootstrap_servers=bootstrap)
    return dataclasses.replace(cfg, broker=broker)
