"""Shared fixtures: a Kafka-protocol broker, unique names and throwaway topics.

Integration tests run against a local Apache Kafka (one KRaft node, from the jars that
``scripts/jars`` resolved) started once per session, or against the cluster that
``PRICING_HA_BOOTSTRAP`` names (``host:port[,host:port]``). Every test
under ``tests/integration`` is marked ``integration`` automatically.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from hypothesis import HealthCheck, settings

from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.waiting import wait_for

BOOTSTRAP_ENV = "PRICING_HA_BOOTSTRAP"

# Property-based fuzzing of the decoders: no per-example deadline (two cores shared with a
# broker make single examples slow at times), a fixed example budget, derandomised so a CI
# failure reproduces; HYPOTHESIS_PROFILE=deep runs ten times more examples, randomised.
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("deep", max_examples=3000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
_INTEGRATION_DIR = Path(__file__).parent / "integration"


class TopicFactory(Protocol):
    """Signature of the ``topic_factory`` fixture."""

    def __call__(self, partitions: int, config: dict[str, str] | None = None) -> str:
        """Create a uniquely named topic and return its name."""
        ...


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test collected from ``tests/integration`` with ``integration``."""
    for item in items:
        if _INTEGRATION_DIR in item.path.parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _root_log_filters_restored() -> Iterator[None]:
    """Undo filters a command adds to the root logger's handlers (``configure_logging``).

    pytest's capture handlers live for the whole session: a connection-log filter a CLI test
    left on them would hide, in every later test, the records ``caplog`` is asked about.
    """
    handlers = {h: list(h.filters) for h in logging.getLogger().handlers}
    yield
    for handler, filters in handlers.items():
        handler.filters[:] = filters


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's ``bootstrap.servers``: ``$PRICING_HA_BOOTSTRAP`` or a local Apache Kafka."""
    external = os.environ.get(BOOTSTRAP_ENV)
    if external:
        yield external
        return
    with LocalKafka(workdir=tmp_path_factory.mktemp("kafka-session")) as broker:
        yield broker.bootstrap


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[LocalKafka]:
    """A broker owned by one test, which may pause, resume or stop it."""
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"needs a broker it can pause or kill; {BOOTSTRAP_ENV} points elsewhere")
    with LocalKafka(workdir=tmp_path / "kafka") as broker:
        yield broker


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """Return a function making names like ``prefix-1f2e3d4c5b6a`` for topics and groups."""

    def make(prefix: str = "test") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    return make


@pytest.fixture
def topic_factory(bootstrap: str, unique_name: Callable[[str], str]) -> Iterator[TopicFactory]:
    """Create uniquely named topics on the session broker; delete them after the test."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created: list[str] = []

    def create(partitions: int, config: dict[str, str] | None = None) -> str:
        name = unique_name("topic")
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
            operation_timeout=10,
        )
        futures[name].result(timeout=15)
        created.append(name)
        _wait_for_partitions(admin, name, partitions)
        return name

    yield create

    if created:
        for future in admin.delete_topics(created, operation_timeout=10).values():
            try:
                future.result(timeout=15)
            except KafkaException as exc:  # best effort: a leftover topic harms nobody
                print(f"could not delete a test topic: {exc}")


def _wait_for_partitions(admin: AdminClient, topic: str, partitions: int) -> None:
    """Block until metadata lists ``topic`` with ``partitions`` partitions, or fail the test."""
    seen: dict[str, int] = {}

    def listed() -> bool:
        meta = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None:
            seen["partitions"] = len(meta.partitions)
        return seen.get("partitions") == partitions

    def what() -> str:
        last = seen.get("partitions", "no")
        return f"topic {topic} to have {partitions} partitions in metadata (last seen: {last})"

    wait_for(listed, 15, what, interval_s=0.05)
