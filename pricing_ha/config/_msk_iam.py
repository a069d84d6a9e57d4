"""Amazon MSK IAM authentication: SASL/OAUTHBEARER tokens for every Kafka client.

MSK's IAM listener (port 9098) takes a SASL/OAUTHBEARER token that is a presigned, SigV4-signed
URL made from the task's AWS credentials; the ``aws-msk-iam-sasl-signer-python`` package (the
``aws`` extra: ``pip install 'pricing-ha[aws]'``) builds it. confluent-kafka asks for a token
through the ``oauth_cb`` setting, when a client starts and again before the current token
expires (about 80 % of its lifetime), so credentials rotated by ECS are picked up without a
restart. Since confluent-kafka 2.13 the callback runs on librdkafka's background thread, for
admin clients too, so it must be thread-safe: :class:`MskIamTokenCallback` keeps no state but
its region and signer.

Selected by ``[broker] auth = "msk_iam"`` with ``aws_region`` (:class:`~pricing_ha.config.
BrokerConfig`), which also sets ``security.protocol=SASL_SSL`` and ``sasl.mechanism=OAUTHBEARER``.
Any other Kafka service (SASL/SCRAM, mTLS, Confluent Cloud...) is configured with plain
``[broker.librdkafka]`` settings instead.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pricing_ha.errors import ConfigError

__all__ = ["SIGNER_MODULE", "MskIamTokenCallback", "Signer", "load_signer"]

log = logging.getLogger("pricing_ha.msk_iam")

#: The module of the ``aws`` extra that signs tokens.
SIGNER_MODULE = "aws_msk_iam_sasl_signer"

Signer = Callable[[str], tuple[str, int]]
"""``signer(region) -> (token, expiry in epoch milliseconds)``, as
``MSKAuthTokenProvider.generate_auth_token`` is."""


def load_signer() -> Signer:
    """Returns the real signer, ``MSKAuthTokenProvider.generate_auth_token``.

    Raises:
        ConfigError: the ``aws`` extra is not installed (keyed to ``broker.auth``).
    """
    try:
        module = importlib.import_module(SIGNER_MODULE)
    except ImportError as exc:
        raise ConfigError(
            "BrokerConfig",
            "auth",
            "'msk_iam' needs the aws extra (pip install 'pricing-ha[aws]'): "
            f"cannot import {SIGNER_MODULE}: {exc}",
        ) from exc
    signer: Signer = module.MSKAuthTokenProvider.generate_auth_token
    return signer


@dataclass(frozen=True, slots=True)
class MskIamTokenCallback:
    """confluent-kafka's ``oauth_cb``: a fresh MSK IAM token for ``region`` on every call.

    Attributes:
        region: the AWS region of the MSK cluster (the token is signed for it).
        signer: makes the token; the real one by default, a fake in tests.
    """

    region: str
    signer: Signer

    def __call__(self, _oauthbearer_config: str | None = None) -> tuple[str, float]:
        """Returns ``(token, expiry)`` with the expiry in epoch seconds, as librdkafka wants.

        Args:
            _oauthbearer_config: librdkafka's ``sasl.oauthbearer.config`` (unused: the token
                depends only on the region and the task's credentials).

        Raises:
            Exception: whatever the signer raises (no credentials, STS unreachable...);
                confluent-kafka reports it as an authentication failure and asks again.
        """
        try:
            token, expiry_ms = self.signer(self.region)
        except Exception:
            # librdkafka turns the exception into an auth error without the traceback.
            log.exception("MSK IAM token generation failed (region %s)", self.region)
            raise
        return token, expiry_ms / 1000.0
