"""SASL/SCRAM over TLS for every Kafka client, and keeping the credentials out of sight.

Selected by ``[broker] auth = "scram"`` (:class:`~pricing_ha.config.BrokerConfig`): clients
speak ``SASL_SSL`` with ``SCRAM-SHA-512`` as ``sasl_username``, with the password read from
``sasl_password_file`` (a file holding it, e.g. a mounted secret) or given as the librdkafka
setting ``sasl.password`` (from the environment: ``PRICING_HA__BROKER__LIBRDKAFKA__SASL_PASSWORD``,
as ECS injects a secret), and trust ``ssl_ca_file`` (default: the system's CAs).

Secrets never leave the client settings: :func:`redacted` is what a ``repr`` shows of the
librdkafka table, and :class:`AuthErrors` (every client's ``error_cb``) records a refused login
so that a command reports it in one line (:func:`authentication_failure`) instead of retrying
until its connect timeout.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pricing_ha.errors import ConfigError

__all__ = [
    "MECHANISM",
    "AuthErrors",
    "authentication_failure",
    "is_secret",
    "read_password",
    "redacted",
    "scram_settings",
]

MECHANISM = "SCRAM-SHA-512"
_SCRAM_SETTINGS = {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM}
# librdkafka keys whose values are credentials (passwords, client secrets, private keys).
_SECRET_KEY = re.compile(r"password|secret|(^|\.)key\.pem$", re.IGNORECASE)
# librdkafka's KafkaError._AUTHENTICATION.
_AUTHENTICATION = -169
_AFTER = re.compile(r"^\S+: | \(after \d+ms in state \w+\)$")

# Where librdkafka's log goes (pricing_ha.kafka.client_log): errors the callback does not keep
# are logged there, in librdkafka's own shape, as they would be without an error_cb.
_client_log = logging.getLogger("pricing_ha.kafka.client")
_lock = threading.Lock()
_failure: tuple[float, str] | None = None  # (monotonic time, reason) of the latest refusal


def is_secret(key: str) -> bool:
    """Whether a librdkafka setting holds a credential (its value is never shown)."""
    return _SECRET_KEY.search(key) is not None


def redacted(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with every credential's value replaced by ``"***"``."""
    return {k: "***" if is_secret(k) else v for k, v in settings.items()}


def read_password(path: Path) -> str:
    """The password in ``path`` (its first line, without the line end).

    Raises:
        ConfigError: the file cannot be read or is empty (keyed to ``sasl_password_file``; the
            message never includes the file's contents).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError("BrokerConfig", "sasl_password_file", f"{path}: {reason}") from exc
    password = text.splitlines()[0] if text else ""
    if not password:
        raise ConfigError("BrokerConfig", "sasl_password_file", f"{path} holds no password")
    return password


def scram_settings(
    settings: dict[str, str], username: str | None, password_file: Path | None, ca: Path | None
) -> dict[str, str]:
    """Validates ``auth = "scram"`` and returns ``librdkafka`` with its TLS/SASL settings.

    Raises:
        ConfigError: no user name, no password or two of them, a contradicting setting.
    """
    if not username:
        raise ConfigError("BrokerConfig", "sasl_username", 'auth = "scram" needs a user name')
    for key, value in _SCRAM_SETTINGS.items():
        given = settings.get(key)
        if given is not None and given.upper() != value:
            raise ConfigError(
                "BrokerConfig",
                f"librdkafka.{key}",
                f'auth = "scram" uses {key}={value}; remove {given!r} or set auth = "passthrough"',
            )
    for key in ("sasl.username", "sasl.mechanisms", "ssl.ca.location"):
        if key in settings:
            raise ConfigError(
                "BrokerConfig",
                f"librdkafka.{key}",
                'conflicts with auth = "scram" (set sasl_username / ssl_ca_file instead)',
            )
    in_settings = "sasl.password" in settings
    if in_settings == (password_file is not None):
        raise ConfigError(
            "BrokerConfig",
            "sasl_password_file",
            'auth = "scram" needs exactly one password: sasl_password_file, or '
            "librdkafka.sasl.password (PRICING_HA__BROKER__LIBRDKAFKA__SASL_PASSWORD)",
        )
    out = {**settings, **_SCRAM_SETTINGS, "sasl.username": username}
    if password_file is not None:
        out["sasl.password"] = read_password(password_file)
    if ca is not None:
        out["ssl.ca.location"] = str(ca)
    return out


def authentication_failure(since: float = float("-inf")) -> str | None:
    """Why a broker refused a login of this process at or after ``since`` (monotonic), or
    ``None``: the latest such refusal."""
    with _lock:
        if _failure is None or _failure[0] < since:
            return None
        return _failure[1]


def _reset() -> None:
    """Forget a recorded failure (tests)."""
    global _failure  # noqa: PLW0603 - one process, one record of refused logins
    with _lock:
        _failure = None


@dataclass(frozen=True, slots=True)
class AuthErrors:
    """confluent-kafka's ``error_cb``: records a refused login (:func:`authentication_failure`).

    Every error is also logged as librdkafka logs it without an ``error_cb`` (an ``ERROR``
    line), so the connection-log filter treats it the same way.

    Attributes:
        username: the SASL user, named in the record (never the password).
    """

    username: str | None

    def __call__(self, error: Any) -> None:
        """Record ``error`` if it is an authentication failure."""
        global _failure  # noqa: PLW0603 - see _reset
        _client_log.error("%s [%s] %s", "ERROR", "error_cb", error.str())
        if error.code() != _AUTHENTICATION:
            return
        reason = _AFTER.sub("", str(error.str()))
        who = f" of user {self.username!r}" if self.username else ""
        with _lock:
            _failure = (time.monotonic(), f"the credentials{who} were refused ({reason})")
