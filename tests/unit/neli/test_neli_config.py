"""NeliConfig: the timing rules, defaults, owned librdkafka keys and immutability."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from neli import Mode, NeliConfig, NeliConfigError, NeliError

OWNED_KEYS = [
    "bootstrap.servers",
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "session.timeout.ms",
    "auto.offset.reset",
    "enable.partition.eof",
]
SECTIONS = ["kafka", "consumer", "producer"]


def make(**overrides: Any) -> NeliConfig:
    """A config with required fields filled in and ``overrides`` applied."""
    fields: dict[str, Any] = {
        "bootstrap_servers": "localhost:9092",
        "group_id": "g1",
        "topic": "pricing.neli",
        "member_name": "m1",
    }
    fields.update(overrides)
    return NeliConfig(**fields)


def refused(**overrides: Any) -> NeliConfigError:
    """The NeliConfigError that ``make(**overrides)`` raises."""
    with pytest.raises(NeliConfigError) as info:
        make(**overrides)
    return info.value


# -- timing rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("threshold_ms", [1000, 999, 500])
def test_nonexclusive_needs_threshold_above_session_timeout(threshold_ms: int) -> None:
    """Non-exclusive mode refuses T <= S: a partition could be left with no leader."""
    err = refused(session_timeout_ms=1000, threshold_ms=threshold_ms, pulse_interval_ms=100)
    assert err.field == "threshold_ms"
    assert "T > session timeout S" in str(err)


def test_nonexclusive_accepts_threshold_just_above_session_timeout() -> None:
    """Non-exclusive mode accepts T = S + 1 ms."""
    cfg = make(session_timeout_ms=1000, threshold_ms=1001)
    assert cfg.threshold_ms == 1001
    assert cfg.threshold_s == 1.001


@pytest.mark.parametrize(
    ("session_ms", "skew_ms", "threshold_ms"),
    [(3000, 200, 2800), (3000, 200, 2900), (3000, 0, 3000), (3000, 200, 5000)],
)
def test_exclusive_needs_threshold_plus_skew_below_session_timeout(
    session_ms: int, skew_ms: int, threshold_ms: int
) -> None:
    """Exclusive mode refuses T + e >= S: two members could lead at once."""
    err = refused(
        mode=Mode.EXCLUSIVE,
        session_timeout_ms=session_ms,
        clock_skew_ms=skew_ms,
        threshold_ms=threshold_ms,
    )
    assert err.field == "threshold_ms"
    assert "T + clock skew e < session timeout S" in str(err)


def test_exclusive_accepts_threshold_plus_skew_just_below_session_timeout() -> None:
    """Exclusive mode accepts T + e = S - 1 ms."""
    cfg = make(mode=Mode.EXCLUSIVE, session_timeout_ms=3000, clock_skew_ms=200, threshold_ms=2799)
    assert cfg.threshold_ms == 2799


@pytest.mark.parametrize(("session_ms", "expected"), [(3000, 6000), (1000, 2000), (1500, 3000)])
def test_nonexclusive_default_threshold_is_twice_session_timeout(
    session_ms: int, expected: int
) -> None:
    """With no threshold given, non-exclusive mode picks T = 2 * S."""
    assert make(session_timeout_ms=session_ms).threshold_ms == expected


@pytest.mark.parametrize(
    ("session_ms", "skew_ms", "expected"),
    [(3000, 200, 1680), (5000, 0, 3000), (6000, 1000, 3000), (10_000, 500, 5700)],
)
def test_exclusive_default_threshold_is_sixty_percent_of_session_minus_skew(
    session_ms: int, skew_ms: int, expected: int
) -> None:
    """With no threshold given, exclusive mode picks T = 0.6 * (S - e), so T + e < S holds."""
    cfg = make(mode=Mode.EXCLUSIVE, session_timeout_ms=session_ms, clock_skew_ms=skew_ms)
    assert cfg.threshold_ms == expected
    assert expected + skew_ms < session_ms


@pytest.mark.parametrize("mode", [Mode.NON_EXCLUSIVE, Mode.EXCLUSIVE])
def test_default_stall_limit_is_half_the_session_timeout(mode: Mode) -> None:
    """With no stall limit given, S / 2 is used."""
    assert make(mode=mode, session_timeout_ms=3000).stall_limit_ms == 1500


@pytest.mark.parametrize("stall_limit_ms", [0, -1, 3000, 4000])
def test_stall_limit_must_be_below_session_timeout(stall_limit_ms: int) -> None:
    """An explicit stall limit must lie strictly between 0 and S."""
    err = refused(session_timeout_ms=3000, stall_limit_ms=stall_limit_ms)
    assert err.field == "stall_limit_ms"


@pytest.mark.parametrize(("skew_ms", "bound_ms"), [(200, 1000), (0, 1000), (900, 1800)])
def test_default_future_bound_is_a_second_or_twice_the_skew(skew_ms: int, bound_ms: int) -> None:
    """With no bound given, heartbeats up to max(1 s, 2 e) ahead of the receiver are accepted."""
    cfg = make(mode=Mode.EXCLUSIVE, session_timeout_ms=6000, clock_skew_ms=skew_ms)
    assert cfg.max_future_ms == bound_ms
    assert cfg.max_future_s == bound_ms / 1000


@pytest.mark.parametrize("bound_ms", [199, -1])
def test_future_bound_below_the_skew_bound_is_refused(bound_ms: int) -> None:
    """A future bound below e would refuse legitimate heartbeats: refused by name."""
    err = refused(clock_skew_ms=200, max_future_ms=bound_ms)
    assert err.field == "max_future_ms"
    assert "e=200 ms" in str(err)


def test_pulse_interval_may_be_a_third_of_threshold() -> None:
    """A pulse interval of exactly T / 3 is accepted."""
    assert make(session_timeout_ms=1000, threshold_ms=3000, pulse_interval_ms=1000)


def test_pulse_interval_above_a_third_of_threshold_is_refused() -> None:
    """A pulse interval above T / 3 is refused: one lost heartbeat would cost leadership."""
    err = refused(session_timeout_ms=1000, threshold_ms=3000, pulse_interval_ms=1001)
    assert err.field == "pulse_interval_ms"
    assert "1000 ms" in str(err)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("session_timeout_ms", 0),
        ("pulse_interval_ms", -5),
        ("check_interval_ms", 0),
        ("barrier_timeout_ms", 0),
        ("start_timeout_ms", -1),
        ("clock_skew_ms", -1),
        ("threshold_ms", -10),
        ("expected_partitions", 0),
    ],
)
def test_out_of_range_numbers_are_refused(field: str, value: int) -> None:
    """Non-positive durations, negative skew and a zero partition count are refused by name."""
    assert refused(**{field: value}).field == field


@pytest.mark.parametrize("field", ["bootstrap_servers", "group_id", "topic", "member_name"])
def test_empty_names_are_refused(field: str) -> None:
    """Empty server, group, topic and member names are refused by name."""
    err = refused(**{field: ""})
    assert err.field == field
    assert "must not be empty" in str(err)


def test_config_error_is_a_neli_error_and_a_value_error() -> None:
    """NeliConfigError sits under NeliError and ValueError and names the field in its message."""
    err = refused(group_id="")
    assert isinstance(err, NeliError)
    assert isinstance(err, ValueError)
    assert err.problem == "must not be empty"
    assert str(err) == "NeliConfig.group_id: must not be empty"


# -- librdkafka passthrough -------------------------------------------------------------------


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("key", OWNED_KEYS)
def test_owned_librdkafka_keys_are_refused(section: str, key: str) -> None:
    """Settings NELI owns cannot be overridden through any passthrough mapping."""
    err = refused(**{section: {key: "x"}})
    assert err.field == f"{section}[{key!r}]"
    assert "owned by NELI" in str(err)


@pytest.mark.parametrize("section", SECTIONS)
def test_kip848_group_protocol_is_refused(section: str) -> None:
    """group.protocol=consumer (KIP-848) is refused with a message naming KIP-848."""
    err = refused(**{section: {"group.protocol": "consumer"}})
    assert err.field == f"{section}['group.protocol']"
    assert "KIP-848" in str(err)


@pytest.mark.parametrize("value", ["classic", "CLASSIC"])
def test_classic_group_protocol_is_allowed(value: str) -> None:
    """group.protocol=classic is accepted and passed to the consumer."""
    cfg = make(consumer={"group.protocol": value})
    assert cfg.consumer_settings()["group.protocol"] == value


def test_consumer_settings_hold_owned_values_and_passthrough() -> None:
    """consumer_settings() has NELI's values plus kafka and consumer passthrough, not producer."""
    cfg = make(
        session_timeout_ms=4000,
        kafka={"security.protocol": "SSL", "client.rack": "a"},
        consumer={"client.rack": "b", "fetch.min.bytes": "1"},
        producer={"compression.type": "lz4"},
    )
    settings = cfg.consumer_settings()
    assert settings["bootstrap.servers"] == "localhost:9092"
    assert settings["group.id"] == "g1"
    assert settings["session.timeout.ms"] == 4000
    assert settings["enable.partition.eof"] is False
    assert settings["security.protocol"] == "SSL"
    assert settings["client.rack"] == "b"  # the consumer section wins over kafka
    assert settings["fetch.min.bytes"] == "1"
    assert "compression.type" not in settings


def test_producer_settings_hold_kafka_and_producer_passthrough() -> None:
    """producer_settings() has kafka and producer passthrough, never consumer-only settings."""
    cfg = make(
        kafka={"security.protocol": "SSL"},
        consumer={"fetch.min.bytes": "1"},
        producer={"compression.type": "lz4"},
    )
    settings = cfg.producer_settings()
    assert settings["bootstrap.servers"] == "localhost:9092"
    assert settings["security.protocol"] == "SSL"
    assert settings["compression.type"] == "lz4"
    assert "fetch.min.bytes" not in settings
    assert "group.id" not in settings


# -- immutability -----------------------------------------------------------------------------


def test_config_is_frozen() -> None:
    """A NeliConfig cannot be changed after validation."""
    cfg = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.threshold_ms = 1  # type: ignore[misc]


def test_config_is_keyword_only() -> None:
    """NeliConfig takes keyword arguments only."""
    with pytest.raises(TypeError):
        NeliConfig("localhost:9092", "g1", "t")  # type: ignore[call-arg]


@pytest.mark.parametrize("section", SECTIONS)
def test_passthrough_mappings_are_read_only_copies(section: str) -> None:
    """Passthrough mappings cannot be changed, through the config or the caller's dict."""
    given = {"client.rack": "a"}
    cfg = make(**{section: given})
    with pytest.raises(TypeError):
        getattr(cfg, section)["client.rack"] = "b"
    given["client.rack"] = "b"
    assert getattr(cfg, section)["client.rack"] == "a"
