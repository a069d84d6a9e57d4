"""Configuration loading: defaults, TOML, environment overrides and validation errors."""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal
from pathlib import Path

import pytest

from pricing_ha.config import (
    AppConfig,
    BrokerConfig,
    GroupsConfig,
    PublisherNeliConfig,
    RelayConfig,
    load_app_config,
    load_config,
)
from pricing_ha.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parents[3] / "config"


def write(tmp_path: Path, text: str) -> Path:
    """Writes a TOML file and returns its path."""
    path = tmp_path / "test.toml"
    path.write_text(text)
    return path


def test_default_toml_spells_out_exactly_the_built_in_defaults() -> None:
    """config/default.toml loads to the same values as AppConfig()."""
    assert load_config(CONFIG_DIR / "default.toml", {}) == AppConfig()


def test_default_toml_documents_every_option() -> None:
    """Every field of every section appears in default.toml, set or commented."""
    text = (CONFIG_DIR / "default.toml").read_text()
    for section in dataclasses.fields(AppConfig):
        assert f"[{section.name}]" in text
        section_cls = type(getattr(AppConfig(), section.name))
        for option in dataclasses.fields(section_cls):
            pattern = rf"(?m)^(# )?\[?{section.name}\.{option.name}\]?|^(# )?{option.name} ="
            assert re.search(pattern, text), f"{section.name}.{option.name} undocumented"


@pytest.mark.parametrize("name", ["p1.toml", "p2.toml"])
def test_production_examples_load(name: str) -> None:
    """The production-style examples are valid and differ from the defaults."""
    cfg = load_config(CONFIG_DIR / name, {})
    assert cfg.topics.replication_factor == 3
    assert cfg.neli.session_timeout_ms >= 6000  # real Kafka's default minimum
    assert cfg.telemetry.az.startswith("eu-west-1")


def test_production_groups_price_identically() -> None:
    """p1.toml and p2.toml have the same pricing parameters, so their prices are byte-equal."""
    p1 = load_config(CONFIG_DIR / "p1.toml", {})
    p2 = load_config(CONFIG_DIR / "p2.toml", {})
    assert p1.pricing == p2.pricing
    assert p1.telemetry.az != p2.telemetry.az


def test_unknown_key_names_file_and_dotted_key(tmp_path: Path) -> None:
    """A misspelt key is an error naming the file and the full key."""
    path = write(tmp_path, "[neli]\nthreshhold_ms = 5000\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.source == str(path)
    assert info.value.key == "neli.threshhold_ms"
    assert "unknown key" in info.value.problem


def test_unknown_section_is_an_error(tmp_path: Path) -> None:
    """An unknown top-level table is rejected."""
    with pytest.raises(ConfigError, match="nelly"):
        load_config(write(tmp_path, "[nelly]\nx = 1\n"), {})


def test_wrong_type_is_an_error(tmp_path: Path) -> None:
    """A string where an integer belongs is rejected with the key and the value."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, '[topics]\npartitions = "four"\n'), {})
    assert info.value.key == "topics.partitions"
    assert "integer" in info.value.problem
    assert "'four'" in info.value.problem


def test_boolean_is_not_an_integer(tmp_path: Path) -> None:
    """TOML true is not accepted for an integer option."""
    with pytest.raises(ConfigError, match=r"topics\.partitions"):
        load_config(write(tmp_path, "[topics]\npartitions = true\n"), {})


def test_section_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    """A scalar where a table belongs is rejected."""
    with pytest.raises(ConfigError, match="expected a table"):
        load_config(write(tmp_path, "neli = 3\n"), {})


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    """A TOML syntax error reports the file and the line."""
    path = write(tmp_path, "[neli]\nthreshold_ms = \n")
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.source == str(path)
    assert info.value.key == "line 2"
    assert "invalid TOML" in info.value.problem


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    """A missing file is reported as a ConfigError, not an OSError."""
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml", {})


def test_file_values_override_defaults(tmp_path: Path) -> None:
    """Values in the file replace the defaults; unset ones keep them."""
    cfg = load_config(write(tmp_path, "[topics]\npartitions = 8\nraw = 'r'\n"), {})
    assert cfg.topics.partitions == 8
    assert cfg.topics.raw == "r"
    assert cfg.topics.quotes == "md.quotes"


def test_env_override_is_parsed_by_field_type_and_case_insensitive(tmp_path: Path) -> None:
    """PRICING_HA__SECTION__KEY sets a value of the field's type, whatever the case."""
    path = write(tmp_path, "[neli]\nthreshold_ms = 5000\n")
    env = {
        "PRICING_HA__NELI__THRESHOLD_MS": "6000",
        "pricing_ha__feed__rate_per_instrument_hz": "2.5",
        "PRICING_HA__Telemetry__Az": "az-b",
    }
    cfg = load_config(path, env)
    assert cfg.neli.threshold_ms == 6000
    assert cfg.feed.rate_per_instrument_hz == 2.5
    assert cfg.telemetry.az == "az-b"


def test_env_parse_error_names_the_variable() -> None:
    """A malformed environment value names the variable as the source."""
    with pytest.raises(ConfigError) as info:
        load_config(None, {"PRICING_HA__NELI__PULSE_INTERVAL_MS": "fast"})
    assert info.value.source == "environment variable PRICING_HA__NELI__PULSE_INTERVAL_MS"
    assert info.value.key == "neli.pulse_interval_ms"


def test_env_unknown_key_is_an_error() -> None:
    """A misspelt environment override is an error, not silently ignored."""
    with pytest.raises(ConfigError) as info:
        load_config(None, {"PRICING_HA__NELI__TRESHOLD_MS": "5000"})
    assert info.value.source == "environment variable PRICING_HA__NELI__TRESHOLD_MS"
    assert "unknown key" in info.value.problem


def test_env_naming_a_table_is_an_error() -> None:
    """An environment variable cannot replace a whole section."""
    with pytest.raises(ConfigError, match="set its keys one by one"):
        load_config(None, {"PRICING_HA__NELI": "x"})


def test_cross_field_error_from_env_names_the_variable() -> None:
    """When an env value breaks a cross-field rule, the variable is named as the source."""
    with pytest.raises(ConfigError) as info:
        load_config(None, {"PRICING_HA__NELI__THRESHOLD_MS": "2000"})
    assert info.value.source == "environment variable PRICING_HA__NELI__THRESHOLD_MS"
    assert info.value.key == "neli.threshold_ms"


def test_bootstrap_env_wins_over_file_and_generic_env(tmp_path: Path) -> None:
    """PRICING_HA_BOOTSTRAP beats both the file and PRICING_HA__BROKER__BOOTSTRAP_SERVERS."""
    path = write(tmp_path, '[broker]\nbootstrap_servers = "file:1"\n')
    env = {"PRICING_HA__BROKER__BOOTSTRAP_SERVERS": "env:2", "PRICING_HA_BOOTSTRAP": "env:3"}
    assert load_config(path, env).broker.bootstrap_servers == "env:3"


def test_bootstrap_option_wins_over_everything() -> None:
    """load_app_config's bootstrap argument (the --bootstrap option) overrides the env."""
    cfg = load_app_config(None, bootstrap="cli:4", env={"PRICING_HA_BOOTSTRAP": "env:3"})
    assert cfg.broker.bootstrap_servers == "cli:4"


def test_blank_bootstrap_option_is_an_error() -> None:
    """An empty --bootstrap is rejected, naming the option."""
    with pytest.raises(ConfigError, match="--bootstrap"):
        load_app_config(None, bootstrap=" ", env={})


def test_config_path_from_environment(tmp_path: Path) -> None:
    """Without --config, PRICING_HA_CONFIG names the file."""
    path = write(tmp_path, "[topics]\npartitions = 6\n")
    cfg = load_app_config(None, env={"PRICING_HA_CONFIG": str(path)})
    assert cfg.topics.partitions == 6


def test_librdkafka_passthrough_from_toml_and_env(tmp_path: Path) -> None:
    """librdkafka values become text; env segments map '_' to '.'."""
    path = write(
        tmp_path,
        "[broker.librdkafka]\n"
        '"socket.timeout.ms" = 9000\n'
        '"enable.ssl.certificate.verification" = false\n',
    )
    env = {"PRICING_HA__BROKER__LIBRDKAFKA__SSL_CA_LOCATION": "/ca.pem"}
    cfg = load_config(path, env)
    assert dict(cfg.broker.librdkafka) == {
        "socket.timeout.ms": "9000",
        "enable.ssl.certificate.verification": "false",
        "ssl.ca.location": "/ca.pem",
    }
    client = cfg.broker.client_config(defaults={"linger.ms": 5}, required={"acks": "all"})
    assert client["bootstrap.servers"] == cfg.broker.bootstrap_servers
    assert client["ssl.ca.location"] == "/ca.pem"
    assert client["acks"] == "all"


def test_librdkafka_passthrough_cannot_override_required_settings() -> None:
    """Required client settings win over the passthrough; defaults lose to it."""
    broker = BrokerConfig(librdkafka={"acks": "1", "linger.ms": "50"})
    client = broker.client_config(defaults={"linger.ms": 5}, required={"acks": "all"})
    assert client["acks"] == "all"
    assert client["linger.ms"] == "50"


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"group.protocol": "consumer"}, "librdkafka.group.protocol"),
        ({"bootstrap.servers": "x:1"}, "librdkafka.bootstrap.servers"),
    ],
)
def test_librdkafka_settings_that_would_break_neli_are_rejected(
    settings: dict[str, str], key: str
) -> None:
    """KIP-848 and a second bootstrap setting are refused with a clear key."""
    with pytest.raises(ConfigError) as info:
        BrokerConfig(librdkafka=settings)
    assert info.value.key == key


def test_per_instrument_pricing_overrides(tmp_path: Path) -> None:
    """[pricing.instruments.X] tables and env overrides set per-instrument parameters."""
    path = write(tmp_path, '[pricing.instruments.USDJPY]\ntick_size = "0.001"\n')
    env = {"PRICING_HA__PRICING__INSTRUMENTS__EURUSD__SPREAD_BPS": "0.5"}
    cfg = load_config(path, env)
    assert cfg.pricing.instruments["USDJPY"].tick_size == Decimal("0.001")
    assert cfg.pricing.instruments["USDJPY"].spread_bps is None
    assert cfg.pricing.instruments["EURUSD"].spread_bps == 0.5


def test_float_tick_size_keeps_its_decimal_spelling(tmp_path: Path) -> None:
    """tick_size written as a TOML float is read as the decimal the user wrote."""
    cfg = load_config(write(tmp_path, "[pricing]\ntick_size = 0.0001\n"), {})
    assert cfg.pricing.tick_size == Decimal("0.0001")


def test_invalid_override_names_the_instrument_key(tmp_path: Path) -> None:
    """A bad per-instrument value names pricing.instruments.<symbol>.<key>."""
    path = write(tmp_path, "[pricing.instruments.USDJPY]\ntick_size = 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.key == "pricing.instruments.USDJPY.tick_size"


def test_non_finite_float_is_rejected(tmp_path: Path) -> None:
    """TOML nan/inf are not accepted for numeric options."""
    with pytest.raises(ConfigError, match="finite"):
        load_config(write(tmp_path, "[pricing]\nspread_bps = nan\n"), {})


def test_symbols_from_env_as_list_or_json() -> None:
    """A list option accepts comma-separated text or a JSON array from the environment."""
    cfg = load_config(None, {"PRICING_HA__FEED__SYMBOLS": "AAPL, MSFT"})
    assert cfg.feed.symbols == ("AAPL", "MSFT")
    cfg = load_config(None, {"PRICING_HA__FEED__SYMBOLS": '["A,B", "C"]'})
    assert cfg.feed.symbols == ("A,B", "C")


def test_optional_value_cleared_by_empty_env(tmp_path: Path) -> None:
    """An empty environment value unsets an optional option."""
    path = write(tmp_path, '[telemetry]\notlp_endpoint = "http://collector:4318"\n')
    assert load_config(path, {}).telemetry.otlp_endpoint == "http://collector:4318"
    cleared = load_config(path, {"PRICING_HA__TELEMETRY__OTLP_ENDPOINT": ""})
    assert cleared.telemetry.otlp_endpoint is None


def test_non_exclusive_publishers_need_threshold_above_session_timeout() -> None:
    """neli.threshold_ms <= session_timeout_ms is refused (T > S for non-exclusive mode)."""
    with pytest.raises(ConfigError) as info:
        PublisherNeliConfig(session_timeout_ms=3000, threshold_ms=3000)
    assert info.value.key == "threshold_ms"
    assert "threshold_ms > session_timeout_ms" in info.value.problem


def test_exclusive_relay_needs_threshold_plus_skew_below_session_timeout() -> None:
    """relay threshold + clock skew >= session timeout is refused (T + e < S)."""
    with pytest.raises(ConfigError, match=r"threshold_ms \+ clock_skew_ms < session_timeout_ms"):
        RelayConfig(session_timeout_ms=3000, threshold_ms=2800, clock_skew_ms=200)
    RelayConfig(
        session_timeout_ms=3000, threshold_ms=2799, clock_skew_ms=200, pulse_interval_ms=300
    )


def test_session_timeout_below_one_second_is_refused() -> None:
    """Session timeouts under 1000 ms (too little room for a loaded host) are refused."""
    with pytest.raises(ConfigError, match="at least 1000 ms"):
        PublisherNeliConfig(session_timeout_ms=900, threshold_ms=1500)


def test_pulse_must_be_well_below_threshold() -> None:
    """A pulse interval above threshold / 4 is refused."""
    with pytest.raises(ConfigError) as info:
        PublisherNeliConfig(threshold_ms=4500, pulse_interval_ms=1200)
    assert info.value.key == "pulse_interval_ms"


def test_direct_construction_errors_name_the_class() -> None:
    """Building a section in code reports the class as the source."""
    with pytest.raises(ConfigError) as info:
        PublisherNeliConfig(threshold_ms=100)
    assert info.value.source == "PublisherNeliConfig"


def test_cross_section_rule_is_checked(tmp_path: Path) -> None:
    """NELI topic retention shorter than the NELI threshold is refused."""
    path = write(tmp_path, "[topics]\nneli_retention_ms = 4000\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.key == "topics.neli_retention_ms"
    assert info.value.source == str(path)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[topics]\nquotes = "bad name"\n', "topics.quotes"),
        ('[topics]\nprices = "prices.raw"\n', "topics.quotes"),
        ("[topics]\npartitions = 0\n", "topics.partitions"),
        ("[health]\nrelay_port = 70000\n", "health.relay_port"),
        ('[telemetry]\notlp_endpoint = "collector:4318"\n', "telemetry.otlp_endpoint"),
        ("[feed]\nsymbols = []\n", "feed.symbols"),
        ('[feed]\nsymbols = ["A", "A"]\n', "feed.symbols"),
        ("[relay]\nreorder_window_ms = -1\n", "relay.reorder_window_ms"),
        ("[relay]\noutput_timeout_ms = 400\n", "relay.output_timeout_ms"),
        ("[relay]\noutput_timeout_ms = 2500\n", "relay.output_timeout_ms"),  # above S
    ],
)
def test_range_checks(tmp_path: Path, toml: str, key: str) -> None:
    """Out-of-range and inconsistent values are refused with their key."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, toml), {})
    assert info.value.key == key


def test_config_is_immutable() -> None:
    """Sections and passthrough mappings cannot be changed after loading."""
    cfg = load_config(None, {"PRICING_HA__BROKER__LIBRDKAFKA__CLIENT_ID": "x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.neli.threshold_ms = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.broker.librdkafka["client.id"] = "y"  # type: ignore[index]


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("publishing = []", "groups.publishing", "at least one"),
        ('publishing = ["p1", "p1"]', "groups.publishing", "twice"),
        ('publishing = ["p 1"]', "groups.publishing", "not a valid group name"),
        ('relay = "p1"', "groups.relay", "also a publishing group"),
    ],
)
def test_groups_are_validated(tmp_path: Path, text: str, key: str, problem: str) -> None:
    """[groups] refuses no publishing group, repeats, unsafe names and a shared relay name."""
    path = write(tmp_path, f"[groups]\n{text}\n")
    with pytest.raises(ConfigError, match=problem) as info:
        load_config(path, {})
    assert (info.value.source, info.value.key) == (str(path), key)


def test_groups_default_to_p1_p2_and_relay() -> None:
    """The default deployment: publishing groups p1 and p2, relay group relay."""
    assert GroupsConfig().names == ("p1", "p2", "relay")


@pytest.mark.parametrize("value", ["none", "transactions"])
def test_removed_relay_fencing_key_is_refused_naming_file_and_key(
    tmp_path: Path, value: str
) -> None:
    """An old file that still sets ``[relay] fencing`` is refused, saying the key is gone."""
    path = write(tmp_path, f'[relay]\nfencing = "{value}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.source == str(path)
    assert info.value.key == "relay.fencing"
    assert "removed" in info.value.problem
    assert "always fences" in info.value.problem


def test_removed_relay_fencing_key_is_refused_from_the_environment() -> None:
    """``PRICING_HA__RELAY__FENCING`` is refused the same way, naming the variable."""
    with pytest.raises(ConfigError) as info:
        load_config(None, {"PRICING_HA__RELAY__FENCING": "none"})
    assert info.value.source == "environment variable PRICING_HA__RELAY__FENCING"
    assert info.value.key == "relay.fencing"
    assert "removed" in info.value.problem


def test_default_config_path_finds_the_repositorys_config_default_toml() -> None:
    """Without --config or $PRICING_HA_CONFIG, a checkout falls back to config/default.toml."""
    from pricing_ha.config import default_config_path

    assert default_config_path() == CONFIG_DIR / "default.toml"
