"""MSK IAM authentication (``[broker] auth = "msk_iam"``): config, token callback, wiring.

No AWS access here: a fake ``aws_msk_iam_sasl_signer`` module stands in for the ``aws`` extra,
so the real import path of :func:`pricing_ha.config._msk_iam.load_signer` is exercised.
"""

from __future__ import annotations

import ast
import sys
import threading
import types
from pathlib import Path

import pytest

import pricing_ha
from pricing_ha.config import RECOVERY_DEFAULTS, BrokerConfig, load_app_config, load_config
from pricing_ha.config._msk_iam import SIGNER_MODULE, MskIamTokenCallback
from pricing_ha.errors import ConfigError

APP_DIR = Path(pricing_ha.__file__).parent
EXPIRY_MS = 1_900_000_000_000


class FakeSigner:
    """Records every region it signs for, from any thread."""

    def __init__(self) -> None:
        self.regions: list[str] = []
        self.called = threading.Event()

    def generate_auth_token(self, region: str) -> tuple[str, int]:
        self.regions.append(region)
        self.called.set()
        return f"token-for-{region}", EXPIRY_MS


@pytest.fixture
def signer(monkeypatch: pytest.MonkeyPatch) -> FakeSigner:
    """Installs a fake ``aws_msk_iam_sasl_signer`` module and returns its signer."""
    fake = FakeSigner()
    module = types.ModuleType(SIGNER_MODULE)
    module.MSKAuthTokenProvider = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, SIGNER_MODULE, module)
    return fake


def msk_toml(tmp_path: Path, body: str = "") -> Path:
    """Writes a config file selecting MSK IAM, plus ``body`` in ``[broker]``."""
    path = tmp_path / "msk.toml"
    path.write_text(
        '[broker]\nbootstrap_servers = "b-1.example:9098"\nauth = "msk_iam"\n'
        f'aws_region = "eu-west-1"\n{body}'
    )
    return path


def test_callback_returns_token_and_expiry_in_seconds(signer: FakeSigner) -> None:
    """oauth_cb signs for the configured region and converts the expiry from ms to s."""
    callback = MskIamTokenCallback("eu-west-1", signer.generate_auth_token)
    assert callback("principal=ignored") == ("token-for-eu-west-1", EXPIRY_MS / 1000)
    assert signer.regions == ["eu-west-1"]


def test_callback_propagates_signer_failure() -> None:
    """A signer failure (no credentials) is raised, for confluent-kafka to report and retry."""

    def failing(region: str) -> tuple[str, int]:
        raise RuntimeError(f"no credentials for {region}")

    with pytest.raises(RuntimeError, match="no credentials for us-east-1"):
        MskIamTokenCallback("us-east-1", failing)(None)


def test_msk_iam_from_toml_sets_sasl_ssl_and_callback(signer: FakeSigner, tmp_path: Path) -> None:
    """auth = "msk_iam" gives every client SASL_SSL, OAUTHBEARER and a working oauth_cb."""
    broker = load_config(msk_toml(tmp_path), {}).broker
    assert broker.librdkafka["security.protocol"] == "SASL_SSL"
    assert broker.librdkafka["sasl.mechanism"] == "OAUTHBEARER"
    settings = broker.client_config(defaults={"linger.ms": 1}, required={"acks": "all"})
    assert settings["bootstrap.servers"] == "b-1.example:9098"
    assert settings["acks"] == "all"
    token, expiry_s = settings["oauth_cb"]("")
    assert (token, expiry_s) == ("token-for-eu-west-1", EXPIRY_MS / 1000)
    assert broker.neli_kafka()["oauth_cb"]("")[0] == "token-for-eu-west-1"


def test_msk_iam_from_environment(signer: FakeSigner) -> None:
    """PRICING_HA__BROKER__AUTH and __AWS_REGION select MSK IAM without a file (as on ECS)."""
    env = {
        "PRICING_HA__BROKER__AUTH": "msk_iam",
        "PRICING_HA__BROKER__AWS_REGION": "ap-southeast-2",
        "PRICING_HA_BOOTSTRAP": "b-1.example:9098,b-2.example:9098",
    }
    broker = load_config(None, env).broker
    assert broker.client_config()["oauth_cb"]("")[0] == "token-for-ap-southeast-2"


def test_passthrough_has_no_callback() -> None:
    """The default auth adds nothing to librdkafka (beside the recovery settings) and no
    callback."""
    broker = BrokerConfig(librdkafka={"security.protocol": "SSL"})
    assert "oauth_cb" not in broker.client_config()
    assert broker.neli_kafka() == {**RECOVERY_DEFAULTS, "security.protocol": "SSL"}


def test_msk_iam_accepts_matching_explicit_settings(signer: FakeSigner, tmp_path: Path) -> None:
    """Repeating MSK's own settings in [broker.librdkafka] (any case) is allowed."""
    path = msk_toml(tmp_path, '[broker.librdkafka]\n"security.protocol" = "sasl_ssl"\n')
    assert load_config(path, {}).broker.librdkafka["security.protocol"] == "SASL_SSL"


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [
        ('auth = "iam"\n', "broker.auth", "must be one of ['msk_iam', 'passthrough', 'scram']"),
        ('aws_region = "eu-west-1"\n', "broker.aws_region", 'only used with auth = "msk_iam"'),
    ],
)
def test_invalid_auth_names_file_key_and_problem(
    tmp_path: Path, body: str, key: str, problem: str
) -> None:
    """A bad auth mode, or a region without MSK IAM, names the file, key and problem."""
    path = tmp_path / "bad.toml"
    path.write_text(f"[broker]\n{body}")
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.source == str(path)
    assert info.value.key == key
    assert problem in info.value.problem


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("", "broker.aws_region", "needs the cluster's AWS region"),
        ('aws_region = "Ireland"\n', "broker.aws_region", "'Ireland'"),
        (
            'aws_region = "eu-west-1"\n[broker.librdkafka]\n"security.protocol" = "SSL"\n',
            "broker.librdkafka.security.protocol",
            "uses security.protocol=SASL_SSL",
        ),
        (
            'aws_region = "eu-west-1"\n[broker.librdkafka]\n"sasl.mechanism" = "SCRAM-SHA-512"\n',
            "broker.librdkafka.sasl.mechanism",
            "uses sasl.mechanism=OAUTHBEARER",
        ),
        (
            'aws_region = "eu-west-1"\n[broker.librdkafka]\n"sasl.password" = "x"\n',
            "broker.librdkafka.sasl.password",
            'conflicts with auth = "msk_iam"',
        ),
    ],
)
def test_invalid_msk_iam_config_names_file_key_and_problem(
    signer: FakeSigner, tmp_path: Path, text: str, key: str, problem: str
) -> None:
    """A missing/invalid region or contradicting librdkafka settings are config errors."""
    path = tmp_path / "bad.toml"
    path.write_text(f'[broker]\nauth = "msk_iam"\n{text}')
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.source == str(path)
    assert info.value.key == key
    assert problem in info.value.problem


def test_missing_aws_extra_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the aws extra, loading an MSK IAM config fails at once, naming the fix."""
    monkeypatch.setitem(sys.modules, SIGNER_MODULE, None)  # makes the import fail
    with pytest.raises(ConfigError) as info:
        load_config(msk_toml(tmp_path), {})
    assert info.value.key == "broker.auth"
    assert "pricing-ha[aws]" in info.value.problem


def test_cli_loading_keeps_msk_iam_with_bootstrap_option(
    signer: FakeSigner, tmp_path: Path
) -> None:
    """--bootstrap replaces the servers but keeps auth and the callback."""
    cfg = load_app_config(msk_toml(tmp_path), bootstrap="b-9.example:9098", env={})
    settings = cfg.broker.client_config()
    assert settings["bootstrap.servers"] == "b-9.example:9098"
    assert "oauth_cb" in settings


def test_confluent_kafka_calls_the_callback(signer: FakeSigner, tmp_path: Path) -> None:
    """A real AdminClient built by make_admin asks the fake signer for a token on its own."""
    from pricing_ha.kafka.topics import make_admin

    # Nothing listens there: librdkafka still fetches a token before connecting.
    cfg = load_app_config(msk_toml(tmp_path), bootstrap="127.0.0.1:9", env={})
    admin = make_admin(cfg)
    try:
        assert signer.called.wait(10), "confluent-kafka never called oauth_cb"
        assert signer.regions[0] == "eu-west-1"
    finally:
        del admin


# --- wiring: every client the application builds gets the callback -------------------------

# Sites that build Kafka clients without BrokerConfig.client_config because no AppConfig is
# there, and add the MSK IAM callback themselves (each tested here). None today: the Spark
# pipeline's clients are Java ones, configured by java_client_properties (in config/). The
# standalone subscriber client takes its caller's librdkafka settings instead, where
# ``oauth_cb`` passes through (test_price_client: the callback reaches the consumer).
OWN_AUTH: set[tuple[str, str]] = {("subscribing/client.py", '"bootstrap.servers"')}
# Sites that read broker settings without building a client.
READ_ONLY = {
    ("member/health.py", ".librdkafka"),  # readiness: security.protocol decides TCP vs ApiVersions
}


def client_config_bypasses() -> set[tuple[str, str]]:
    """(module, what) for every place outside config/ and local/ that could build a client
    around BrokerConfig.client_config: a ``.librdkafka`` read or a ``"bootstrap.servers"`` key."""
    found: set[tuple[str, str]] = set()
    for path in sorted(APP_DIR.rglob("*.py")):
        rel = path.relative_to(APP_DIR).as_posix()
        if rel.startswith(("config/", "local/")):  # local/: the local broker only
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "librdkafka":
                found.add((rel, ".librdkafka"))
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "bootstrap.servers" for k in node.keys
            ):
                found.add((rel, '"bootstrap.servers"'))
    return found


def test_clients_are_built_from_client_config() -> None:
    """No code builds a Kafka client around client_config (and so without oauth_cb)."""
    unexpected = client_config_bypasses() - READ_ONLY - OWN_AUTH
    assert not unexpected, f"build these clients with cfg.broker.client_config(): {unexpected}"


def test_client_config_is_what_the_app_uses() -> None:
    """The application's client builders call client_config (the check above has teeth)."""
    callers = {
        path.relative_to(APP_DIR).as_posix()
        for path in APP_DIR.rglob("*.py")
        if ".client_config(" in path.read_text(encoding="utf-8")
    }
    expected = {"kafka/topics.py", "publishing/quote_worker.py", "dedupe/relay_clients.py"}
    expected |= {"status.py", "dedupe/output_producers.py", "feed/producer.py"}
    expected |= {"subscribing/subscriber.py"}
    assert expected <= callers


def test_the_pipeline_gives_the_java_client_the_iam_login_module(
    signer: FakeSigner, tmp_path: Path
) -> None:
    """Spark's Kafka source (a Java client) gets MSK IAM as the Java client's IAM login module
    and callback handler, not librdkafka's OAUTHBEARER pair."""
    from pricing_ha.config import java_client_properties

    cfg = load_app_config(msk_toml(tmp_path, '[broker.librdkafka]\n"client.rack" = "euw1-az1"\n'))
    java = java_client_properties(cfg.broker)
    assert java == {
        "bootstrap.servers": "b-1.example:9098",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "AWS_MSK_IAM",
        "sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
        "sasl.client.callback.handler.class": (
            "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
        ),
        "client.rack": "euw1-az1",
    }
