"""The librdkafka settings every client gets for fast recovery after a broker is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from neli import Mode, Variant
from pricing_ha.config import (
    CONSUMER_RECOVERY_DEFAULTS,
    RECOVERY_DEFAULTS,
    AppConfig,
    BrokerConfig,
    load_config,
)
from pricing_ha.errors import ConfigError
from pricing_ha.feed.producer import PRODUCER_DEFAULTS, PRODUCER_REQUIRED
from pricing_ha.member.runner import make_neli


def test_every_built_client_gets_the_recovery_settings() -> None:
    """client_config carries each recovery setting below the caller's own defaults."""
    built = BrokerConfig().client_config(defaults=PRODUCER_DEFAULTS, required=PRODUCER_REQUIRED)
    for key, value in RECOVERY_DEFAULTS.items():
        assert built[key] == value, key
    assert built["socket.timeout.ms"] < 60_000  # librdkafka's default, too slow for a frozen node
    assert built["reconnect.backoff.max.ms"] <= 1_000


def test_librdkafka_table_overrides_a_recovery_setting(tmp_path: Path) -> None:
    """A user's [broker.librdkafka] value wins over the built-in recovery value."""
    path = tmp_path / "c.toml"
    path.write_text('[broker.librdkafka]\n"socket.timeout.ms" = "8000"\n')
    broker = load_config(path, {}).broker
    assert broker.client_config()["socket.timeout.ms"] == "8000"
    assert broker.neli_kafka()["socket.timeout.ms"] == "8000"


def test_neli_members_get_the_recovery_settings() -> None:
    """The NELI passthrough carries the recovery settings, so heartbeats recover as fast."""
    kafka = AppConfig().broker.neli_kafka()
    assert {k: kafka[k] for k in RECOVERY_DEFAULTS} == RECOVERY_DEFAULTS


def test_socket_timeout_the_relay_cannot_use_is_refused_at_load(tmp_path: Path) -> None:
    """socket.timeout.ms above the relay's transaction timeout + 100 is a config error (the
    relay's transactional producers could not be created and it would never emit)."""
    path = tmp_path / "c.toml"
    path.write_text('[broker.librdkafka]\n"socket.timeout.ms" = "60000"\n')
    with pytest.raises(ConfigError, match=r"socket\.timeout\.ms.*transaction\.timeout\.ms"):
        load_config(path, {})
    path.write_text(
        '[broker.librdkafka]\n"socket.timeout.ms" = "60000"\n"transaction.timeout.ms" = "60000"\n'
    )
    assert load_config(path, {}).broker.librdkafka["socket.timeout.ms"] == "60000"


def test_consumers_ask_for_a_lost_coordinator_every_second_producers_are_not_told() -> None:
    """A client with a group.id gets coordinator.query.interval.ms (10 s: 1 s while the
    coordinator is lost); a producer or admin client does not (librdkafka would warn)."""
    broker = BrokerConfig()
    consumer = broker.client_config(required={"group.id": "g", "enable.auto.commit": False})
    producer = broker.client_config(defaults=PRODUCER_DEFAULTS, required=PRODUCER_REQUIRED)
    assert consumer["coordinator.query.interval.ms"] == 10_000
    assert CONSUMER_RECOVERY_DEFAULTS == {"coordinator.query.interval.ms": 10_000}
    assert "coordinator.query.interval.ms" not in producer
    assert "coordinator.query.interval.ms" not in broker.client_config()
    assert "coordinator.query.interval.ms" not in broker.neli_kafka()  # NELI's producer too
    assert broker.neli_consumer() == {"coordinator.query.interval.ms": 10_000}


def test_the_librdkafka_table_overrides_the_consumer_setting_everywhere(tmp_path: Path) -> None:
    """[broker.librdkafka] wins for the application's consumers and NELI's alike."""
    path = tmp_path / "c.toml"
    path.write_text('[broker.librdkafka]\n"coordinator.query.interval.ms" = "30000"\n')
    broker = load_config(path, {}).broker
    assert broker.client_config(required={"group.id": "g"})["coordinator.query.interval.ms"] == (
        "30000"
    )
    assert broker.neli_consumer() == {"coordinator.query.interval.ms": "30000"}


def test_a_neli_member_consumer_carries_the_consumer_setting() -> None:
    """The member runner hands the consumer setting to NELI's consumer, not its producer."""
    neli = make_neli(
        AppConfig(), group_id="g", member_name="m", variant=Variant.FULL, mode=Mode.NON_EXCLUSIVE
    )
    assert neli.config.consumer_settings()["coordinator.query.interval.ms"] == 10_000
    assert "coordinator.query.interval.ms" not in neli.config.producer_settings()
