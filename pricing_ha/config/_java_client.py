"""The broker settings for a Java Kafka client (Spark's ``kafka`` source), from librdkafka names.

``[broker.librdkafka]`` holds librdkafka properties, the language of every client the service
builds. Spark reads the topics with the Java client, which spells many of them differently and
takes some only as file contents. :func:`java_client_properties` translates:

===============================================  ==============================================
librdkafka                                       Java client
===============================================  ==============================================
``security.protocol``                            the same, upper case
``sasl.mechanism`` / ``sasl.mechanisms``         ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256/512)
``sasl.username`` + ``sasl.password``            ``sasl.jaas.config``: ``PlainLoginModule`` or
                                                 ``ScramLoginModule``, both values quoted
``ssl.ca.location`` (a file)                     ``ssl.truststore.location``, type ``PEM``
``ssl.ca.pem``                                   ``ssl.truststore.certificates``, type ``PEM``
``ssl.certificate.location`` +                   ``ssl.keystore.certificate.chain`` +
``ssl.key.location``                             ``ssl.keystore.key``, type ``PEM``: the files'
                                                 *contents*, read here (the Java client takes a
                                                 PEM key file only if it is encrypted)
``ssl.certificate.pem`` + ``ssl.key.pem``        the same two, as given
``ssl.key.password``                             the same (an encrypted PEM key)
``ssl.keystore.location`` / ``.password``        the same, type ``PKCS12``
``ssl.endpoint.identification.algorithm``        the same; ``none`` becomes empty
``fetch.wait.max.ms``                            ``fetch.max.wait.ms``
:data:`SAME_NAME` (``client.rack``...)           the same
===============================================  ==============================================

``auth = "msk_iam"`` (whose ``security.protocol``/``sasl.mechanism`` in ``librdkafka`` are the
OAUTHBEARER ones confluent-kafka needs) becomes the Java client's IAM login:
``SASL_SSL``, ``AWS_MSK_IAM``, ``IAMLoginModule`` and ``IAMClientCallbackHandler``. Those classes
are in the ``aws-msk-iam-auth`` jar (``software.amazon.msk:aws-msk-iam-auth``), which must be on
Spark's classpath next to the connector; nothing here resolves it.

Settings of producers only (:data:`PRODUCER_ONLY`, ``linger.ms``...) are left out: a reader
has no producer. Any other property is a :class:`~pricing_ha.errors.ConfigError` naming it,
never passed on (the Java client ignores a name it does not know, with a warning nobody reads)
nor dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pricing_ha.errors import ConfigError

if TYPE_CHECKING:
    from pricing_ha.config._broker import BrokerConfig

__all__ = ["MSK_IAM", "PRODUCER_ONLY", "SAME_NAME", "java_client_properties"]

#: Properties whose name and meaning are the same in librdkafka and the Java client.
SAME_NAME = frozenset(
    {
        "client.dns.lookup",
        "client.id",
        "client.rack",
        "connections.max.idle.ms",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "max.partition.fetch.bytes",
        "metadata.max.age.ms",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "retry.backoff.max.ms",
        "retry.backoff.ms",
        "socket.connection.setup.timeout.ms",
    }
)
#: librdkafka properties that configure producers only: nothing for a reader to translate.
PRODUCER_ONLY = frozenset(
    {
        "acks",
        "batch.num.messages",
        "batch.size",
        "compression.codec",
        "compression.level",
        "compression.type",
        "delivery.timeout.ms",
        "enable.idempotence",
        "linger.ms",
        "max.in.flight",
        "max.in.flight.requests.per.connection",
        "message.send.max.retries",
        "message.timeout.ms",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.messages",
        "queue.buffering.max.ms",
        "request.required.acks",
        "retries",
        "sticky.partitioning.linger.ms",
        "transaction.timeout.ms",
    }
)
_RENAMED = {"fetch.wait.max.ms": "fetch.max.wait.ms"}
_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: What MSK IAM gives the Java client (the ``aws-msk-iam-auth`` jar provides both classes).
MSK_IAM = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "AWS_MSK_IAM",
    "sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
    "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
}


class _Translation:
    """One translation: the librdkafka settings still to place, errors keyed to ``source``."""

    def __init__(self, settings: dict[str, str], source: str) -> None:
        self.settings = settings
        self.source = source
        self.out: dict[str, str] = {}

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.source, f"broker.librdkafka.{key}", problem)

    def take(self, key: str) -> str | None:
        return self.settings.pop(key, None)

    def read(self, key: str, path: str) -> str:
        try:
            return Path(path).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise self.error(key, f"cannot read PEM file {path!r}: {exc}") from exc

    def protocol(self) -> None:
        given = self.take("security.protocol")
        if given is None:
            return
        if given.upper() not in _PROTOCOLS:
            raise self.error("security.protocol", f"{given!r} is not one of {sorted(_PROTOCOLS)}")
        self.out["security.protocol"] = given.upper()

    def sasl(self) -> None:
        mechanisms = [k for k in ("sasl.mechanism", "sasl.mechanisms") if k in self.settings]
        if len(mechanisms) == 2:
            raise self.error("sasl.mechanisms", "set sasl.mechanism or its alias, not both")
        key = mechanisms[0] if mechanisms else "sasl.mechanism"
        mechanism = self.take(key)
        username, password = self.take("sasl.username"), self.take("sasl.password")
        if mechanism is None:
            if username is not None or password is not None:
                raise self.error("sasl.mechanism", "sasl.username/password need PLAIN or SCRAM")
            return
        module = _LOGIN_MODULES.get(mechanism.upper())
        if module is None:
            raise self.error(
                key,
                f"{mechanism!r} has no translation for the Java client (PLAIN, SCRAM-SHA-256 and"
                ' SCRAM-SHA-512 do; Amazon MSK IAM is [broker] auth = "msk_iam")',
            )
        if username is None or password is None:
            missing = "sasl.username" if username is None else "sasl.password"
            raise self.error(missing, f"{mechanism} needs sasl.username and sasl.password")
        for name, value in (("sasl.username", username), ("sasl.password", password)):
            if "\n" in value or "\r" in value:
                raise self.error(name, "a line break cannot be quoted in a JAAS configuration")
        self.out["sasl.mechanism"] = mechanism.upper()
        self.out["sasl.jaas.config"] = (
            f"{module} required username={_jaas_quote(username)} password={_jaas_quote(password)};"
        )

    def truststore(self) -> None:
        location, pem = self.take("ssl.ca.location"), self.take("ssl.ca.pem")
        if location is not None and pem is not None:
            raise self.error("ssl.ca.pem", "set ssl.ca.location or ssl.ca.pem, not both")
        if location is not None:
            if not Path(location).is_file():
                raise self.error(
                    "ssl.ca.location",
                    f"{location!r} is not a file: the Java client takes one PEM file of CA"
                    " certificates (not a directory, nor 'probe')",
                )
            self.out |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": location}
        elif pem is not None:
            self.out |= {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pem}

    def keystore(self) -> None:
        cert_file, cert_pem = (
            self.take("ssl.certificate.location"),
            self.take("ssl.certificate.pem"),
        )
        key_file, key_pem = self.take("ssl.key.location"), self.take("ssl.key.pem")
        store, store_password = (
            self.take("ssl.keystore.location"),
            self.take("ssl.keystore.password"),
        )
        key_password = self.take("ssl.key.password")
        if cert_file is not None and cert_pem is not None:
            raise self.error("ssl.certificate.pem", "set it or ssl.certificate.location, not both")
        if key_file is not None and key_pem is not None:
            raise self.error("ssl.key.pem", "set it or ssl.key.location, not both")
        if store_password is not None and store is None:
            raise self.error("ssl.keystore.password", "set without ssl.keystore.location")
        cert = self.read("ssl.certificate.location", cert_file) if cert_file else cert_pem
        key = self.read("ssl.key.location", key_file) if key_file else key_pem
        if cert is not None or key is not None:
            if store is not None:
                raise self.error(
                    "ssl.keystore.location", "set a keystore or a certificate, not both"
                )
            if cert is None or key is None:
                missing = "ssl.certificate.location" if cert is None else "ssl.key.location"
                raise self.error(missing, "a client certificate needs both a certificate and a key")
            self.out |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": cert,
                "ssl.keystore.key": key,
            }
        elif store is not None:
            self.out |= {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": store}
            if store_password is not None:
                self.out["ssl.keystore.password"] = store_password
        elif key_password is not None:
            raise self.error("ssl.key.password", "set without a client certificate")
        if key_password is not None:
            self.out["ssl.key.password"] = key_password

    def endpoint_identification(self) -> None:
        given = self.take("ssl.endpoint.identification.algorithm")
        if given is None:
            return
        if given.lower() not in {"none", "https"}:
            raise self.error("ssl.endpoint.identification.algorithm", f"{given!r}: none or https")
        self.out["ssl.endpoint.identification.algorithm"] = (
            "" if given.lower() == "none" else "https"
        )


def _jaas_quote(value: str) -> str:
    """``value`` as a double-quoted JAAS option value (Kafka parses it with a StreamTokenizer,
    which reads backslash escapes inside quotes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_properties(broker: BrokerConfig, *, source: str = "BrokerConfig") -> dict[str, str]:
    """The Java client's properties for ``broker``: ``bootstrap.servers`` and the translated
    ``[broker.librdkafka]`` (the module docstring has the table).

    Args:
        broker: the application's broker settings.
        source: where they came from (the configuration file), for errors.

    Returns:
        Java client property names and values, without Spark's ``kafka.`` prefix.

    Raises:
        ConfigError: a property has no Java equivalent here, or its value cannot be translated
            (a PEM file that cannot be read, a mechanism without a login module...).
    """
    t = _Translation(dict(broker.librdkafka), source)
    if broker.auth == "msk_iam":
        # The OAUTHBEARER pair confluent-kafka needs; the Java client has its own mechanism.
        t.take("security.protocol")
        t.take("sasl.mechanism")
        t.out |= MSK_IAM
    else:
        t.protocol()
        t.sasl()
    t.truststore()
    t.keystore()
    t.endpoint_identification()
    for key in sorted(t.settings):
        value = t.settings[key]
        if key in SAME_NAME:
            t.out[key] = value
        elif key in _RENAMED:
            t.out[_RENAMED[key]] = value
        elif key not in PRODUCER_ONLY:
            raise t.error(
                key,
                "has no Java-client equivalent that the pipeline translates for Spark's kafka"
                " source (pricing_ha/config/_java_client.py lists those that have one)",
            )
    return {"bootstrap.servers": broker.bootstrap_servers, **t.out}
