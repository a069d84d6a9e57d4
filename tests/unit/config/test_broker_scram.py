"""[broker] auth = "scram": settings, validation, refused logins recorded, no secret in repr."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pricing_ha.config import AppConfig, BrokerConfig, _scram, java_client_properties, load_config
from pricing_ha.errors import ConfigError

SECRET = "hunter2-Zq9"


def _password_file(tmp_path: Path) -> Path:
    path = tmp_path / "kafka-password"
    path.write_text(SECRET + "\n", encoding="utf-8")
    return path


def test_scram_sets_sasl_ssl_user_password_and_ca(tmp_path: Path) -> None:
    """auth = "scram" gives every client SASL_SSL, SCRAM-SHA-512, the user, the file's password."""
    broker = BrokerConfig(
        auth="scram",
        sasl_username="relay",
        sasl_password_file=_password_file(tmp_path),
        ssl_ca_file=tmp_path / "ca.pem",
    )
    conf = broker.client_config()
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "relay"
    assert conf["sasl.password"] == SECRET
    assert conf["ssl.ca.location"] == str(tmp_path / "ca.pem")
    assert isinstance(conf["error_cb"], _scram.AuthErrors)
    assert broker.neli_kafka()["sasl.password"] == SECRET


def test_password_from_the_environment(tmp_path: Path) -> None:
    """The password may come as librdkafka.sasl.password from the environment (ECS secrets)."""
    path = tmp_path / "c.toml"
    path.write_text('[broker]\nauth = "scram"\nsasl_username = "feed"\n', encoding="utf-8")
    env = {"PRICING_HA__BROKER__LIBRDKAFKA__SASL_PASSWORD": SECRET}
    cfg = load_config(path, env)
    assert cfg.broker.client_config()["sasl.password"] == SECRET
    assert SECRET not in repr(cfg)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({}, "sasl_username"),
        ({"sasl_username": "feed"}, "sasl_password_file"),
        (
            {"sasl_username": "feed", "librdkafka": {"sasl.password": "x"}, "file": True},
            "sasl_password_file",
        ),
        (
            {"sasl_username": "feed", "file": True, "librdkafka": {"security.protocol": "SSL"}},
            "librdkafka.security.protocol",
        ),
    ],
)
def test_scram_misconfigurations_name_the_key(
    tmp_path: Path, kwargs: dict[str, object], key: str
) -> None:
    """No user, no password, two passwords or a contradicting protocol: a ConfigError on its key."""
    args = dict(kwargs)
    if args.pop("file", False):
        args["sasl_password_file"] = _password_file(tmp_path)
    with pytest.raises(ConfigError) as info:
        BrokerConfig(auth="scram", **args)  # type: ignore[arg-type]
    assert info.value.key == key
    assert SECRET not in str(info.value)


def test_an_unreadable_password_file_is_a_config_error(tmp_path: Path) -> None:
    """A missing or empty password file is refused at load time, naming the file."""
    for path in (tmp_path / "missing", tmp_path / "empty"):
        if path.name == "empty":
            path.write_text("", encoding="utf-8")
        with pytest.raises(ConfigError, match=str(path)) as info:
            BrokerConfig(auth="scram", sasl_username="feed", sasl_password_file=path)
        assert info.value.key == "sasl_password_file"


def test_scram_fields_need_auth_scram() -> None:
    """sasl_username without auth = "scram" is refused (it would silently do nothing)."""
    with pytest.raises(ConfigError) as info:
        BrokerConfig(sasl_username="feed")
    assert info.value.key == "sasl_username"


def test_repr_hides_every_credential(tmp_path: Path) -> None:
    """repr of the broker section and the whole config shows no password, secret or private key."""
    passthrough = BrokerConfig(
        librdkafka={
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "u",
            "sasl.password": SECRET,
            "ssl.key.password": SECRET + "k",
            "ssl.key.pem": SECRET + "pem",
            "sasl.oauthbearer.client.secret": SECRET + "c",
        }
    )
    scram = BrokerConfig(
        auth="scram", sasl_username="relay", sasl_password_file=_password_file(tmp_path)
    )
    for broker in (passthrough, scram):
        for text in (repr(broker), repr(AppConfig(broker=broker)), str(broker)):
            assert SECRET not in text
            assert "***" in text
    assert "sasl.username': 'u'" in repr(passthrough)


def test_a_refused_login_is_recorded_with_the_user_not_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The error callback keeps the first line of an authentication failure, naming the user,
    and logs every error as librdkafka would."""
    _scram._reset()
    errors = _scram.AuthErrors("feed")
    errors(SimpleNamespace(code=lambda: -187, str=lambda: "1/1 brokers are down"))
    assert _scram.authentication_failure() is None
    assert [r.getMessage() for r in caplog.records] == ["ERROR [error_cb] 1/1 brokers are down"]
    errors(
        SimpleNamespace(
            code=lambda: -169,
            str=lambda: (
                "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication "
                "failed (after 312ms in state AUTH_REQ)"
            ),
        )
    )
    failure = _scram.authentication_failure()
    _scram._reset()
    assert failure == (
        "the credentials of user 'feed' were refused (SASL authentication error: "
        "Authentication failed)"
    )


def test_the_java_client_gets_the_same_scram_login(tmp_path: Path) -> None:
    """Spark's Java client: SASL_SSL, a SCRAM JAAS login as the user, the CA as PEM truststore."""
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n", encoding="ascii")
    broker = BrokerConfig(
        auth="scram",
        sasl_username="pipeline",
        sasl_password_file=_password_file(tmp_path),
        ssl_ca_file=ca,
    )
    props = java_client_properties(broker)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert "ScramLoginModule required" in props["sasl.jaas.config"]
    assert 'username="pipeline"' in props["sasl.jaas.config"]
    assert props["ssl.truststore.location"] == str(ca)
