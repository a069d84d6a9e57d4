"""librdkafka settings translated for the Java client (Spark's ``kafka`` source): pure, no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from pricing_ha.config import BrokerConfig, java_client_properties
from pricing_ha.errors import ConfigError

BOOTSTRAP = "b-1.example:9096,b-2.example:9096"


def java(settings: dict[str, str]) -> dict[str, str]:
    """The Java properties of a passthrough broker with ``settings`` in ``[broker.librdkafka]``."""
    return java_client_properties(BrokerConfig(bootstrap_servers=BOOTSTRAP, librdkafka=settings))


def test_plaintext_is_only_the_bootstrap_servers() -> None:
    """Nothing configured: the Java client gets the bootstrap servers and nothing else."""
    assert java({}) == {"bootstrap.servers": BOOTSTRAP}


def test_scram_over_tls_with_a_private_ca(tmp_path: Path) -> None:
    """SASL_SSL + SCRAM + a CA file: protocol upper-cased, the mechanism alias renamed, a JAAS
    line with both values quoted (quote and backslash escaped), the CA as a PEM truststore."""
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    props = java(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "pricing-p1",
            "sasl.password": 'pa"ss\\word',
            "ssl.ca.location": str(ca),
        }
    )
    assert props == {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required"
            ' username="pricing-p1" password="pa\\"ss\\\\word";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
    }


def test_plain_uses_the_plain_login_module() -> None:
    """SASL/PLAIN gets PlainLoginModule."""
    props = java(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
        }
    )
    assert props["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
        ' username="u" password="p";'
    )


def test_client_certificate_files_become_a_pem_keystore_of_their_contents(tmp_path: Path) -> None:
    """mTLS: the certificate and key files are read (the Java client takes an unencrypted PEM
    key only inline); the key's password is passed on; ``none`` turns host checks off."""
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n")
    key.write_text(
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nKEY\n-----END ENCRYPTED PRIVATE KEY-----\n"
    )
    props = java(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
            "ssl.key.password": "secret",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert props == {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": cert.read_text(),
        "ssl.keystore.key": key.read_text(),
        "ssl.key.password": "secret",
        "ssl.endpoint.identification.algorithm": "",
    }


def test_inline_pem_and_pkcs12_keystores() -> None:
    """ssl.ca.pem/ssl.certificate.pem/ssl.key.pem go inline; a PKCS#12 keystore keeps its path."""
    inline = java(
        {"ssl.ca.pem": "CA", "ssl.certificate.pem": "CERT", "ssl.key.pem": "KEY"},
    )
    assert inline == {
        "bootstrap.servers": BOOTSTRAP,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": "CA",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "CERT",
        "ssl.keystore.key": "KEY",
    }
    store = java({"ssl.keystore.location": "/etc/p.p12", "ssl.keystore.password": "pw"})
    assert store == {
        "bootstrap.servers": BOOTSTRAP,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": "/etc/p.p12",
        "ssl.keystore.password": "pw",
    }


def test_same_names_pass_renames_rename_and_producer_settings_stay_out() -> None:
    """client.rack (same name) passes, fetch.wait.max.ms is renamed, and linger.ms (producers
    only: a reader has none) is left out."""
    props = java({"client.rack": "euw1-az1", "fetch.wait.max.ms": "50", "linger.ms": "5"})
    assert props == {
        "bootstrap.servers": BOOTSTRAP,
        "client.rack": "euw1-az1",
        "fetch.max.wait.ms": "50",
    }


@pytest.mark.parametrize(
    ("settings", "key", "problem"),
    [
        pytest.param(
            {"statistics.interval.ms": "1000"},
            "statistics.interval.ms",
            "no Java-client equivalent",
            id="no-equivalent",
        ),
        pytest.param(
            {"enable.ssl.certificate.verification": "false"},
            "enable.ssl.certificate.verification",
            "no Java-client equivalent",
            id="no-verification-switch",
        ),
        pytest.param(
            {"security.protocol": "TLS"}, "security.protocol", "not one of", id="bad-protocol"
        ),
        pytest.param(
            {"sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"},
            "sasl.mechanism",
            "no translation",
            id="gssapi",
        ),
        pytest.param(
            {"sasl.mechanisms": "OAUTHBEARER"},
            "sasl.mechanisms",
            "msk_iam",
            id="oauthbearer-passthrough",
        ),
        pytest.param(
            {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u"},
            "sasl.password",
            "needs sasl.username and sasl.password",
            id="no-password",
        ),
        pytest.param(
            {"sasl.username": "u", "sasl.password": "p"},
            "sasl.mechanism",
            "need PLAIN or SCRAM",
            id="credentials-without-mechanism",
        ),
        pytest.param(
            {"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "a\nb"},
            "sasl.password",
            "line break",
            id="unquotable-password",
        ),
        pytest.param(
            {"sasl.mechanism": "PLAIN", "sasl.mechanisms": "PLAIN"},
            "sasl.mechanisms",
            "not both",
            id="mechanism-twice",
        ),
        pytest.param(
            {"ssl.ca.location": "probe"}, "ssl.ca.location", "is not a file", id="ca-probe"
        ),
        pytest.param(
            {"ssl.certificate.pem": "CERT"},
            "ssl.key.location",
            "both a certificate and a key",
            id="certificate-without-key",
        ),
        pytest.param(
            {"ssl.certificate.location": "/nonexistent/c.pem", "ssl.key.pem": "KEY"},
            "ssl.certificate.location",
            "cannot read PEM file '/nonexistent/c.pem'",
            id="unreadable-certificate",
        ),
        pytest.param(
            {"ssl.key.password": "pw"},
            "ssl.key.password",
            "without a client certificate",
            id="key-password-alone",
        ),
        pytest.param(
            {"ssl.endpoint.identification.algorithm": "strict"},
            "ssl.endpoint.identification.algorithm",
            "none or https",
            id="bad-identification",
        ),
    ],
)
def test_what_cannot_be_translated_is_an_error_naming_the_key(
    settings: dict[str, str], key: str, problem: str
) -> None:
    """An untranslatable property or value raises ConfigError naming that key, never dropped."""
    with pytest.raises(ConfigError) as info:
        java(settings)
    assert info.value.key == f"broker.librdkafka.{key}"
    assert problem in info.value.problem


def test_the_error_source_is_what_the_caller_names(tmp_path: Path) -> None:
    """The error names the configuration file the caller passes, and never a secret's value."""
    broker = BrokerConfig(
        librdkafka={"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "s\n3cr3t"}
    )
    with pytest.raises(ConfigError) as info:
        java_client_properties(broker, source=str(tmp_path / "prod.toml"))
    assert str(info.value).startswith(f"{tmp_path / 'prod.toml'}: broker.librdkafka.sasl.password")
    assert "3cr3t" not in str(info.value)
