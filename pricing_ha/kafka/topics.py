"""The topic layout: creating the topics and refusing to run when their partitions differ.

Leading NELI partition k means owning instrument slice k end to end (docs/architecture.md, "Topics
and partitioning"): quotes from ``md.quotes[k]``, output to ``prices.raw[k]``, relayed to
``prices[k]``. That only holds if every topic has the same partition count M, so every process
checks the layout at startup with :func:`check_layout`, and ``pricing-ha topics create`` makes it
with :func:`create_topics` (idempotently: an existing topic with the right count is fine, a wrong
count is an error, since partitions cannot be removed and adding them would move instruments).

All broker calls are bounded by ``broker.connect_timeout_ms``; a broker that does not answer
gives :class:`~pricing_ha.errors.BrokerUnavailableError` instead of a hang.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pricing_ha.config import AppConfig, TopicsConfig, authentication_failure
from pricing_ha.errors import BrokerAuthenticationError, BrokerUnavailableError, TopicLayoutError
from pricing_ha.kafka.client_log import client_log_settings, mark_connected

__all__ = [
    "MetadataSource",
    "TopicSpec",
    "check_layout",
    "create_topics",
    "fetch_metadata",
    "make_admin",
    "partition_counts",
    "topic_specs",
]

# Replicas an acks=all write must reach once a topic has three or more (topic_specs).
_MIN_INSYNC_REPLICAS = 2
_RETRY_PAUSE_S = (0.1, 0.25, 0.5, 1.0)  # back-off between metadata attempts, then 1 s each
_UNAVAILABLE = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)


class MetadataSource(Protocol):
    """Any confluent-kafka client: ``AdminClient``, ``Producer`` or ``Consumer``."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Returns cluster metadata (``ClusterMetadata``) or raises ``KafkaException``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicSpec:
    """One topic to create.

    Attributes:
        name: the topic name.
        partitions: M.
        replication_factor: replicas per partition.
        config: per-topic configuration (e.g. ``retention.ms``).
    """

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str]


def topic_specs(cfg: TopicsConfig) -> list[TopicSpec]:
    """Returns the six topics of the pipeline, all with ``cfg.partitions`` partitions.

    The NELI topic gets ``retention.ms = neli_retention_ms``. With three or more replicas, every
    topic gets ``min.insync.replicas = 2``: ``acks=all`` never accepts a write held by a single
    replica, and survives the loss of one broker (RF 3) or of one AZ holding two of four
    replicas (RF 4 over two AZs, deploy/terraform), where ``RF - 1`` would stop every producer.
    """
    common: dict[str, str] = {}
    if cfg.replication_factor >= 3:
        common["min.insync.replicas"] = str(_MIN_INSYNC_REPLICAS)
    specs = []
    for role, name in cfg.by_role().items():
        config = dict(common)
        if role == "neli":
            config["retention.ms"] = str(cfg.neli_retention_ms)
        specs.append(
            TopicSpec(
                name=name,
                partitions=cfg.partitions,
                replication_factor=cfg.replication_factor,
                config=types.MappingProxyType(config),
            )
        )
    return specs


def make_admin(cfg: AppConfig) -> AdminClient:
    """Creates a confluent-kafka ``AdminClient`` from the configuration."""
    return AdminClient(
        {
            **cfg.broker.client_config(defaults={"client.id": "pricing-ha-admin"}),
            **client_log_settings(),
        }
    )


def _timeout_s(cfg: AppConfig, timeout_s: float | None) -> float:
    return cfg.broker.connect_timeout_ms / 1000 if timeout_s is None else timeout_s


def fetch_metadata(
    client: MetadataSource,
    bootstrap: str,
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Fetches cluster metadata, retrying until ``timeout_s`` has passed.

    Args:
        client: a confluent-kafka ``AdminClient``, ``Producer`` or ``Consumer``.
        bootstrap: the bootstrap servers, for the error message.
        timeout_s: the overall bound.
        clock: monotonic clock, injectable for tests.
        sleep: sleep function, injectable for tests.

    Returns:
        The ``ClusterMetadata`` of all topics (asking for all topics never auto-creates one).

    Raises:
        BrokerUnavailableError: if no broker answered in time.
        BrokerAuthenticationError: a broker refused the client's credentials (at once: retrying
            cannot help).
    """
    began = time.monotonic()
    deadline = clock() + timeout_s
    attempt = 0
    while True:
        attempt += 1
        remaining = deadline - clock()
        try:
            metadata = client.list_topics(timeout=max(0.1, min(remaining, 5.0)))
        except KafkaException as exc:
            last = exc
        else:
            mark_connected()
            return metadata
        refused = _refused_login(client, began)
        if refused is not None:
            raise BrokerAuthenticationError(
                f"the broker at {bootstrap} refused to authenticate this client: {refused}. "
                "Check [broker] sasl_username and its password (sasl_password_file, or "
                "PRICING_HA__BROKER__LIBRDKAFKA__SASL_PASSWORD)."
            ) from last
        pause = _RETRY_PAUSE_S[min(attempt, len(_RETRY_PAUSE_S)) - 1]
        if clock() + pause >= deadline:
            break
        sleep(pause)
    raise BrokerUnavailableError(
        f"the broker at {bootstrap} did not answer within {timeout_s:g} s "
        f"({attempt} attempt{'s' if attempt > 1 else ''}; last error: {_describe(last)}). "
        "Is it running? Start one with "
        f"`pricing-ha broker`, or point PRICING_HA_BOOTSTRAP / --bootstrap at your cluster."
    ) from last


def _refused_login(client: MetadataSource, since: float) -> str | None:
    """Why a broker refused this process's login since ``since``, else ``None``.

    Serves the client's callbacks first (``poll(0)``: the ``error_cb`` that records a refusal
    runs from there; nothing is assigned yet, so a consumer returns no message).
    """
    poll = getattr(client, "poll", None)
    if poll is not None:
        poll(0)
    return authentication_failure(since)


def _describe(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def partition_counts(metadata: Any, names: list[str]) -> dict[str, int | None]:
    """Returns each topic's partition count from ``metadata``, ``None`` when it does not exist."""
    counts: dict[str, int | None] = {}
    for name in names:
        topic = metadata.topics.get(name)
        counts[name] = None if topic is None or topic.error is not None else len(topic.partitions)
    return counts


def _layout_problem(counts: Mapping[str, int | None], expected: int) -> str | None:
    if all(count == expected for count in counts.values()):
        return None
    lines = [f"topic layout does not match: every topic needs {expected} partitions"]
    for name, count in counts.items():
        if count is None:
            lines.append(f"  {name}: missing")
        elif count != expected:
            lines.append(f"  {name}: {count} partitions (expected {expected})")
        else:
            lines.append(f"  {name}: {count} partitions")
    lines.append(
        "Create missing topics with `pricing-ha topics create`; a topic with the wrong count must "
        "be deleted and recreated (or topics.partitions changed to match)."
    )
    return "\n".join(lines)


def check_layout(admin: MetadataSource, cfg: AppConfig, *, timeout_s: float | None = None) -> None:
    """Refuses to go on unless every topic exists with ``topics.partitions`` partitions.

    Args:
        admin: a confluent-kafka ``AdminClient`` (a ``Producer`` or ``Consumer`` works too).
        cfg: the configuration (topic names, M, bootstrap, timeout).
        timeout_s: bound on waiting for the broker; default ``broker.connect_timeout_ms``.

    Raises:
        TopicLayoutError: listing each topic's partition count, when any is missing or differs.
        BrokerUnavailableError: if the broker does not answer.
    """
    metadata = fetch_metadata(admin, cfg.broker.bootstrap_servers, _timeout_s(cfg, timeout_s))
    counts = partition_counts(metadata, list(cfg.topics.by_role().values()))
    problem = _layout_problem(counts, cfg.topics.partitions)
    if problem is not None:
        raise TopicLayoutError(problem)


def create_topics(admin: Any, cfg: AppConfig, *, timeout_s: float | None = None) -> dict[str, bool]:
    """Creates whichever topics are missing, then checks the whole layout.

    Args:
        admin: a confluent-kafka ``AdminClient``.
        cfg: the configuration.
        timeout_s: bound on each broker interaction; default ``broker.connect_timeout_ms``.

    Returns:
        ``{topic: True if created now, False if it already existed}``, in pipeline order.

    Raises:
        TopicLayoutError: if an existing topic has the wrong partition count, or the broker
            refuses to create one (the message says why).
        BrokerUnavailableError: if the broker does not answer.
    """
    timeout = _timeout_s(cfg, timeout_s)
    bootstrap = cfg.broker.bootstrap_servers
    specs = topic_specs(cfg.topics)
    counts = partition_counts(fetch_metadata(admin, bootstrap, timeout), [s.name for s in specs])
    wrong = {name: n for name, n in counts.items() if n is not None and n != cfg.topics.partitions}
    if wrong:
        raise TopicLayoutError(_layout_problem(counts, cfg.topics.partitions) or str(wrong))
    missing = [s for s in specs if counts[s.name] is None]
    created = {s.name: False for s in specs}
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.config))
                for s in missing
            ],
            request_timeout=timeout,
            operation_timeout=timeout,
        )
        for name, future in futures.items():
            created[name] = _await_creation(name, future, bootstrap, timeout)
    _wait_for_layout(admin, cfg, timeout)
    return created


def _await_creation(name: str, future: Any, bootstrap: str, timeout_s: float) -> bool:
    try:
        future.result(timeout=timeout_s + 1)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False  # created concurrently by someone else; the layout check follows
        if error.code() in _UNAVAILABLE:
            raise BrokerUnavailableError(
                f"the broker at {bootstrap} did not confirm creating {name}: {error}"
            ) from exc
        raise TopicLayoutError(f"the broker refused to create {name}: {error.str()}") from exc
    except TimeoutError as exc:
        raise BrokerUnavailableError(
            f"the broker at {bootstrap} did not confirm creating {name} within {timeout_s:g} s"
        ) from exc
    return True


def _wait_for_layout(admin: MetadataSource, cfg: AppConfig, timeout_s: float) -> None:
    # A real cluster propagates new topics' metadata to all brokers asynchronously; poll briefly
    # before concluding that the layout is wrong.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            check_layout(admin, cfg, timeout_s=max(0.1, deadline - time.monotonic()))
        except TopicLayoutError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
        else:
            return
