"""``[broker]``: how every client reaches and authenticates to the Kafka-protocol cluster.

Plain or as ``librdkafka`` says (``auth = "passthrough"``), Amazon MSK IAM (``"msk_iam"``,
:mod:`._msk_iam`) or SASL/SCRAM over TLS (``"scram"``, :mod:`._scram`). Import
:class:`BrokerConfig` from :mod:`pricing_ha.config`.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pricing_ha.config import _msk_iam, _scram
from pricing_ha.config._sections import check, check_ms

__all__ = ["CONSUMER_RECOVERY_DEFAULTS", "RECOVERY_DEFAULTS", "BrokerConfig"]

# The relay's transaction.timeout.ms unless [broker.librdkafka] sets it (dedupe.output_producers).
_RELAY_TXN_TIMEOUT_MS = 10_000

#: librdkafka settings of every client, for fast recovery after a broker is lost
#: (docs/deploy.md#client-settings-for-broker-faults); ``[broker.librdkafka]`` overrides each.
RECOVERY_DEFAULTS: dict[str, str | int | bool] = {
    # librdkafka refreshes metadata at once on a leader error or a lost connection; the
    # periodic refresh catches what no error reports: a leader moved back by preferred leader
    # election, and a leader blackholed with its AZ (no error until socket.timeout.ms). In the
    # AZ rehearsal (AZ a and broker 1 cut for 20 s, docs/measurements.md) a partition led by
    # broker 1 was silent 29 s with the defaults (until after the heal) and 4.6-5.0 s with a
    # 1 s refresh (the broker session timeout, the election, the refresh). 300 s by default;
    # the cost is one metadata request per client per second.
    "topic.metadata.refresh.interval.ms": 1_000,
    "metadata.max.age.ms": 3_000,  # 3x the refresh (900 s by default)
    # A broker or AZ blackholed (no RST, no FIN): give up a connection attempt after 5 s, not
    # 30 s, and an unanswered request after 10 s, not 60 s, so that requests queued for a
    # frozen leader are retried on the new one soon after the controller has moved it.
    "socket.connection.setup.timeout.ms": 5_000,
    "socket.timeout.ms": 10_000,
    # A restarted broker is reconnected to within 1 s (10 s by default, after a few refusals).
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1_000,
    # Dead peers of idle connections are found by TCP keepalive (the OS's timers) too.
    "socket.keepalive.enable": True,
}

#: Settings of every consumer (a client with a ``group.id``) on top of :data:`RECOVERY_DEFAULTS`;
#: ``[broker.librdkafka]`` overrides each. A consumer that has lost its group coordinator asks
#: for it again every tenth of this interval: once a minute with librdkafka's 600 s, once a
#: second with 10 s (and a FindCoordinator request every 10 s while all is well). After broker
#: stalls of 6 and 12 s, consumers went without their coordinator for 20 s and more; whether
#: this shortens that is not established (docs/measurements.md, "Broker stalls of S, 2·S and
#: 4·S on one node").
CONSUMER_RECOVERY_DEFAULTS: dict[str, str | int | bool] = {
    "coordinator.query.interval.ms": 10_000,
}

_AUTH_MODES = frozenset({"passthrough", "msk_iam", "scram"})
_SCRAM_FIELDS = ("sasl_username", "sasl_password_file", "ssl_ca_file")
# e.g. eu-west-1, us-gov-west-1, ap-southeast-4, il-central-1
_AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")
# What MSK's IAM listener speaks; the user's librdkafka table may repeat these, not contradict them.
_MSK_IAM_SETTINGS = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}
# Settings that would make librdkafka use another credential than the signed token.
_MSK_IAM_CONFLICTS = (
    "sasl.mechanisms",  # librdkafka's alias of sasl.mechanism: one spelling only
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.config",
    "sasl.username",
    "sasl.password",
)


# repr=False: __repr__ below hides credentials.
@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class BrokerConfig:
    """How every client reaches the Kafka-protocol cluster.

    Attributes:
        bootstrap_servers: ``host:port[,host:port...]``. Default ``"127.0.0.1:9092"`` (a local
            broker).
        connect_timeout_ms: how long a command waits for the broker to answer before failing
            with ``BrokerUnavailableError``. Default 10000.
        auth: how clients authenticate. ``"passthrough"``: exactly as ``librdkafka`` says
            (plaintext, TLS, SASL/SCRAM, mTLS...). ``"msk_iam"``: Amazon MSK IAM, SASL/OAUTHBEARER
            with tokens signed from the AWS credentials (needs the ``aws`` extra and
            ``aws_region``); it sets ``security.protocol=SASL_SSL`` and
            ``sasl.mechanism=OAUTHBEARER`` in ``librdkafka`` and gives every client a token
            callback (:mod:`pricing_ha.config._msk_iam`). ``"scram"``: SASL/SCRAM-SHA-512 over
            TLS as ``sasl_username`` (:mod:`pricing_ha.config._scram`). Default
            ``"passthrough"``.
        aws_region: the MSK cluster's AWS region, e.g. ``"eu-west-1"``; required by
            ``auth = "msk_iam"`` and refused otherwise. Default unset.
        sasl_username: the SCRAM user (the deployment's role: ``feed``, ``p1``, ``relay``...);
            ``auth = "scram"`` only, where it is required. Default unset.
        sasl_password_file: a file whose first line is the SCRAM password; read at load
            time. Alternatively ``librdkafka.sasl.password`` (from the environment); exactly one
            of the two with ``auth = "scram"``. Default unset.
        ssl_ca_file: the CA certificate (PEM) the brokers' certificates are checked against;
            ``auth = "scram"`` only. Default unset (the system's CAs).
        librdkafka: extra librdkafka properties passed to every client (TLS, SASL...); they
            override :data:`RECOVERY_DEFAULTS` and each client's own defaults.
            Default empty. ``bootstrap.servers`` and ``group.protocol`` cannot be set here.
            Credentials here (``sasl.password``...) never appear in a ``repr``.
    """

    bootstrap_servers: str = "127.0.0.1:9092"
    connect_timeout_ms: int = 10_000
    auth: str = "passthrough"
    aws_region: str | None = None
    sasl_username: str | None = None
    sasl_password_file: Path | None = None
    ssl_ca_file: Path | None = None
    librdkafka: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))

    def __post_init__(self) -> None:
        check(bool(self.bootstrap_servers.strip()), self, "bootstrap_servers", "must not be empty")
        check_ms(self, "connect_timeout_ms", self.connect_timeout_ms, 100)
        check(
            "bootstrap.servers" not in self.librdkafka,
            self,
            "librdkafka.bootstrap.servers",
            "set broker.bootstrap_servers instead",
        )
        protocol = self.librdkafka.get("group.protocol", "classic")
        check(
            protocol == "classic",
            self,
            "librdkafka.group.protocol",
            f"NELI needs the classic group protocol (KIP-848 '{protocol}' ignores client "
            "session timeouts)",
        )
        self._check_socket_timeout()
        settings = dict(self.librdkafka)
        check(
            self.auth in _AUTH_MODES,
            self,
            "auth",
            f"must be one of {sorted(_AUTH_MODES)}, got {self.auth!r}",
        )
        if self.auth == "scram":
            settings = _scram.scram_settings(
                settings, self.sasl_username, self.sasl_password_file, self.ssl_ca_file
            )
        else:
            for name in _SCRAM_FIELDS:
                check(
                    getattr(self, name) is None,
                    self,
                    name,
                    f'is only used with auth = "scram" (auth is {self.auth!r})',
                )
        if self.auth == "msk_iam":
            settings = self._msk_iam_settings(settings)
        else:
            check(
                self.aws_region is None,
                self,
                "aws_region",
                f'is only used with auth = "msk_iam" (auth is {self.auth!r})',
            )
        object.__setattr__(self, "librdkafka", types.MappingProxyType(settings))

    def _check_socket_timeout(self) -> None:
        """librdkafka refuses to create a transactional producer (the relay's) whose
        ``socket.timeout.ms`` exceeds ``transaction.timeout.ms`` + 100, and the relay then
        never emits: refuse that at load, naming both keys."""
        raw_socket = self.librdkafka.get("socket.timeout.ms")
        if raw_socket is None:
            return
        raw_txn = self.librdkafka.get("transaction.timeout.ms", _RELAY_TXN_TIMEOUT_MS)
        try:
            socket_ms, txn_ms = int(raw_socket), int(raw_txn)
        except ValueError:
            return  # librdkafka names the bad value itself
        check(
            socket_ms <= txn_ms + 100,
            self,
            "librdkafka.socket.timeout.ms",
            f"{socket_ms} exceeds transaction.timeout.ms ({txn_ms}) + 100, which the relay's "
            "transactional producers refuse; lower it or raise librdkafka.transaction.timeout.ms",
        )

    def _msk_iam_settings(self, settings: dict[str, str]) -> dict[str, str]:
        """Validates ``auth = "msk_iam"`` and returns ``librdkafka`` with its TLS/SASL settings."""
        region = self.aws_region
        check(
            region is not None and _AWS_REGION.fullmatch(region) is not None,
            self,
            "aws_region",
            f'auth = "msk_iam" needs the cluster\'s AWS region, e.g. "eu-west-1"; got {region!r}',
        )
        for key, value in _MSK_IAM_SETTINGS.items():
            given = settings.get(key)
            check(
                given is None or given.lower() == value.lower(),
                self,
                f"librdkafka.{key}",
                f'auth = "msk_iam" uses {key}={value}; remove {given!r} or set auth = '
                '"passthrough"',
            )
        for key in _MSK_IAM_CONFLICTS:
            check(
                key not in settings,
                self,
                f"librdkafka.{key}",
                'conflicts with auth = "msk_iam" (the token comes from the AWS credentials)',
            )
        _msk_iam.load_signer()  # the aws extra must be installed: fail at load, not at connect
        return {**settings, **_MSK_IAM_SETTINGS}

    def client_config(
        self,
        *,
        defaults: Mapping[str, str | int | float | bool] | None = None,
        required: Mapping[str, str | int | float | bool] | None = None,
    ) -> dict[str, Any]:
        """Builds a confluent-kafka configuration dict.

        Args:
            defaults: settings the user's ``librdkafka`` table may override (e.g. linger.ms);
                they come on top of :data:`RECOVERY_DEFAULTS`.
            required: settings the application depends on (e.g. acks); they win.

        Returns:
            ``bootstrap.servers`` plus :data:`RECOVERY_DEFAULTS` (and, for a consumer, i.e.
            a configuration with a ``group.id``, :data:`CONSUMER_RECOVERY_DEFAULTS`),
            defaults, pass-through settings and required settings, plus the authentication
            callbacks (:meth:`callbacks`). Values are librdkafka
            scalars or, for ``oauth_cb``, a callable, which confluent-kafka accepts but its type
            hints (``dict[str, str | int | float | bool]``) do not describe; hence ``Any``.
        """
        consumer = "group.id" in {**(defaults or {}), **(required or {})}
        return {
            "bootstrap.servers": self.bootstrap_servers,
            **RECOVERY_DEFAULTS,
            **(CONSUMER_RECOVERY_DEFAULTS if consumer else {}),
            **(defaults or {}),
            **self.librdkafka,
            **(required or {}),
            **self.callbacks(),
        }

    def callbacks(self) -> dict[str, Any]:
        """The callback settings ``auth`` needs: ``{"oauth_cb": ...}`` for MSK IAM, the
        ``error_cb`` that records a refused login for SCRAM (:class:`~._scram.AuthErrors`).

        Callables cannot live in the text-only ``librdkafka`` table; clients not built by
        :meth:`client_config` (the NELI members) add these to their settings themselves.
        """
        if self.auth == "scram":
            return {"error_cb": _scram.AuthErrors(self.sasl_username)}
        if self.auth != "msk_iam":
            return {}
        assert self.aws_region is not None  # checked in __post_init__
        return {"oauth_cb": _msk_iam.MskIamTokenCallback(self.aws_region, _msk_iam.load_signer())}

    def neli_consumer(self) -> dict[str, Any]:
        """:data:`CONSUMER_RECOVERY_DEFAULTS` and their ``librdkafka`` overrides: the
        ``consumer`` passthrough for NELI members (their consumer joins the group)."""
        return {k: self.librdkafka.get(k, v) for k, v in CONSUMER_RECOVERY_DEFAULTS.items()}

    def neli_kafka(self) -> dict[str, Any]:
        """:data:`RECOVERY_DEFAULTS`, ``librdkafka`` and :meth:`callbacks`: the ``kafka``
        passthrough for NELI members."""
        return {**RECOVERY_DEFAULTS, **self.librdkafka, **self.callbacks()}

    def __repr__(self) -> str:
        """The fields, with every credential of ``librdkafka`` shown as ``"***"``."""
        shown = ", ".join(
            f"{f}={_scram.redacted(getattr(self, f)) if f == 'librdkafka' else getattr(self, f)!r}"
            for f in _FIELDS
        )
        return f"BrokerConfig({shown})"


_FIELDS = tuple(f.name for f in fields(BrokerConfig))
