"""The local Apache Kafka's secured mode: SASL/SCRAM over TLS, ACLs from the role table.

``LocalKafka(secured=True)`` makes, in its work directory, a test certificate authority and one
broker certificate (``openssl``), a SCRAM-SHA-512 user per role of
:func:`~pricing_ha.security.role_table` plus the super user ``admin`` (added when the nodes are
formatted: ``StorageTool format --add-scram``), and runs each node with:

* the client listener ``SASL_SSL`` (SCRAM-SHA-512 over TLS; clients need only the CA);
* inter-broker traffic on that same listener, each broker authenticating as ``admin``;
* the KRaft controller listener on ``127.0.0.1`` over mutual TLS: a broker or controller
  presents the broker certificate, whose principal ``User:CN=pricing-ha-broker`` is a super user;
* ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: a principal may do only
  what an ACL allows, and the ACLs are those of :mod:`pricing_ha.security.acls`.

Passwords are random per cluster, kept in ``secrets/<user>.password`` (mode 0600) for clients'
``sasl_password_file``, and never in a ``repr``. Plain mode (no TLS, no SASL, no authorizer)
stays the default.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pricing_ha.config import AppConfig
from pricing_ha.errors import LocalKafkaError
from pricing_ha.security import role_table

__all__ = ["ADMIN", "BROKER_PRINCIPAL", "MECHANISM", "Secured"]

#: The super user that creates topics and ACLs, and that brokers authenticate as to each other.
ADMIN = "admin"
#: The principal of the broker certificate (controller traffic is mutual TLS).
BROKER_PRINCIPAL = "User:CN=pricing-ha-broker"
MECHANISM = "SCRAM-SHA-512"
_LISTENER = "SASL_SSL"
_CERT_DAYS = "7"


def _openssl(*argv: str, cwd: Path) -> None:
    tool = shutil.which("openssl")
    if tool is None:
        raise LocalKafkaError("secured mode needs openssl on PATH to make its certificates")
    done = subprocess.run(
        [tool, *argv], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise LocalKafkaError(f"openssl {argv[0]} failed: {done.stderr.strip()[-2000:]}")


@dataclass(frozen=True)
class Secured:
    """A secured cluster's TLS material and SCRAM users (see the module docstring).

    Attributes:
        dir: where the material lives (``<workdir>/security``).
        host: the client listeners' address (named in the broker certificate).
        passwords: user -> password; hidden from ``repr``.
    """

    dir: Path
    host: str
    passwords: dict[str, str] = field(repr=False)

    @classmethod
    def create(cls, workdir: Path, host: str) -> Secured:
        """Make a CA, a broker certificate and a password per user under ``workdir``."""
        d = workdir / "security"
        (d / "secrets").mkdir(parents=True, exist_ok=True)
        users = [ADMIN, *role_table(AppConfig())]
        passwords = {u: secrets.token_urlsafe(18) for u in users}
        made = cls(d, host, passwords)
        made._make_certificates()
        for user, password in passwords.items():
            path = made.password_file(user)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(password + "\n")
        return made

    @property
    def ca_file(self) -> Path:
        """The test CA's certificate (PEM): what clients trust."""
        return self.dir / "ca.pem"

    @property
    def _keystore(self) -> Path:
        return self.dir / "broker-keystore.pem"

    def password_file(self, user: str) -> Path:
        """The file holding ``user``'s password (one line, mode 0600)."""
        return self.dir / "secrets" / f"{user}.password"

    def _key_password(self) -> str:
        return self.passwords[ADMIN]  # encrypts the broker key; never leaves the work directory

    def _make_certificates(self) -> None:
        d = self.dir
        sans = "IP:127.0.0.1,DNS:localhost"
        if self.host not in {"127.0.0.1", "localhost"}:
            sans += f",IP:{self.host}" if self.host[0].isdigit() else f",DNS:{self.host}"
        (d / "broker.ext").write_text(
            f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n", encoding="utf-8"
        )
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", _CERT_DAYS, "-subj", "/CN=pricing-ha-test-ca", cwd=d,
        )  # fmt: skip
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out",
            "broker.csr", "-subj", "/CN=pricing-ha-broker", cwd=d,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "broker.pem", "-days", _CERT_DAYS, "-extfile",
            "broker.ext", cwd=d,
        )  # fmt: skip
        # Kafka's PEM keystore file: an encrypted PKCS#8 key, then the certificate chain. Java 17
        # reads PBES1 (PBEWithSHA1AndDESede), not openssl's default PBES2, key encryption.
        _openssl(
            "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", "broker.key", "-out",
            "broker-key.p8", "-passout", f"pass:{self._key_password()}", cwd=d,
        )  # fmt: skip
        chain = [(d / n).read_text(encoding="utf-8") for n in ("broker-key.p8", "broker.pem")]
        self._keystore.write_text("".join(chain) + self.ca_file.read_text(encoding="utf-8"))
        for name in ("ca.key", "broker.key", "broker.csr", "broker-key.p8"):
            (d / name).unlink()
        self._keystore.chmod(0o600)

    def scram_format_args(self) -> list[str]:
        """``StorageTool format`` arguments that add every user's SCRAM credential."""
        args: list[str] = []
        for user, password in self.passwords.items():
            args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
        return args

    def server_settings(self, host: str, client_port: int, controller_port: int) -> dict[str, str]:
        """A node's ``server.properties`` for this mode (replacing the plain listeners)."""
        scram = MECHANISM.lower()
        admin_login = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN}" password="{self.passwords[ADMIN]}";'
        )
        return {
            "listeners": (
                f"{_LISTENER}://{host}:{client_port},CONTROLLER://127.0.0.1:{controller_port}"
            ),
            "advertised.listeners": f"{_LISTENER}://{host}:{client_port}",
            "inter.broker.listener.name": _LISTENER,
            "listener.security.protocol.map": f"{_LISTENER}:SASL_SSL,CONTROLLER:SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.{_LISTENER.lower()}.{scram}.sasl.jaas.config": admin_login,
            "listener.name.controller.ssl.client.auth": "required",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self._keystore),
            "ssl.key.password": self._key_password(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{ADMIN};{BROKER_PRINCIPAL}",
        }

    def client_settings(self, user: str) -> dict[str, str]:
        """librdkafka settings of a client authenticating as ``user`` (password included)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": self.passwords[user],
            "ssl.ca.location": str(self.ca_file),
        }
