"""Creating and checking the topic layout on a real Kafka-protocol broker."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource  # where the typed package defines it
from typer.testing import CliRunner

from pricing_ha.cli import app
from pricing_ha.config import AppConfig, BrokerConfig, TopicsConfig
from pricing_ha.errors import BrokerUnavailableError, TopicLayoutError
from pricing_ha.kafka.topics import check_layout, create_topics, make_admin

ROLES = ("quotes", "neli", "raw", "prices", "dlq", "raw_dlq")


def free_port() -> int:
    """Returns a local TCP port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def layout(bootstrap: str, unique_name: Callable[[str], str]) -> Iterator[AppConfig]:
    """A configuration whose six topics have fresh names; deletes whatever was created."""
    names = {role: unique_name(role.replace("_", "-")) for role in ROLES}
    cfg = AppConfig(
        broker=BrokerConfig(bootstrap_servers=bootstrap, connect_timeout_ms=10_000),
        # mypy cannot tell that names holds only the six topic names (str fields).
        topics=TopicsConfig(**names),  # type: ignore[arg-type]
    )
    yield cfg
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=10).topics)
    doomed = [n for n in names.values() if n in existing]
    if doomed:
        for future in admin.delete_topics(doomed, operation_timeout=10).values():
            future.result(timeout=15)


def test_create_then_check_and_idempotent_recreate(layout: AppConfig) -> None:
    """create makes all six topics with M partitions; a second create finds them all."""
    admin = make_admin(layout)
    first = create_topics(admin, layout)
    assert list(first) == list(layout.topics.by_role().values())
    assert all(first.values())
    check_layout(admin, layout)
    counts = {
        name: len(admin.list_topics(timeout=10).topics[name].partitions)
        for name in layout.topics.by_role().values()
    }
    assert set(counts.values()) == {layout.topics.partitions}
    assert not any(create_topics(admin, layout).values())


def test_neli_topic_gets_short_retention(layout: AppConfig) -> None:
    """The broker stores retention.ms on the NELI topic."""
    admin = make_admin(layout)
    create_topics(admin, layout)
    resource = ConfigResource("topic", layout.topics.neli)
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    assert entries["retention.ms"].value == str(layout.topics.neli_retention_ms)


def test_check_refuses_missing_topics(layout: AppConfig) -> None:
    """Before create, check lists every topic as missing."""
    with pytest.raises(TopicLayoutError) as info:
        check_layout(make_admin(layout), layout)
    for name in layout.topics.by_role().values():
        assert f"{name}: missing" in str(info.value)


def test_mismatched_partition_count_is_refused(
    layout: AppConfig, topic_factory: Callable[[int], str]
) -> None:
    """An existing topic with another partition count stops create and check with its count."""
    odd = topic_factory(2)
    cfg = AppConfig(
        broker=layout.broker,
        topics=dataclasses.replace(layout.topics, prices=odd),
    )
    admin = make_admin(cfg)
    with pytest.raises(TopicLayoutError, match=rf"{odd}: 2 partitions \(expected 4\)"):
        create_topics(admin, cfg)
    assert layout.topics.quotes not in admin.list_topics(timeout=10).topics  # nothing created
    with pytest.raises(TopicLayoutError, match=rf"{odd}: 2 partitions"):
        check_layout(admin, cfg)


def test_unreachable_broker_fails_within_the_bound() -> None:
    """With nothing listening, check gives BrokerUnavailableError after about the timeout."""
    cfg = AppConfig(
        broker=BrokerConfig(bootstrap_servers=f"127.0.0.1:{free_port()}", connect_timeout_ms=1500)
    )
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match=r"did not answer within 1\.5 s"):
        check_layout(make_admin(cfg), cfg)
    assert time.monotonic() - started < 10


def test_cli_create_and_check(layout: AppConfig) -> None:
    """`topics check` fails with status 4 before `topics create`, and passes after it."""
    env = {
        f"PRICING_HA__TOPICS__{role.upper()}": name
        for role, name in zip(ROLES, layout.topics.by_role().values(), strict=True)
    }
    args = ["--bootstrap", layout.broker.bootstrap_servers]
    runner = CliRunner()
    before = runner.invoke(app, ["topics", "check", *args], env=env)
    assert before.exit_code == 4, before.output
    assert "missing" in before.stderr
    created = runner.invoke(app, ["topics", "create", *args], env=env)
    assert created.exit_code == 0, created.output
    assert f"created {layout.topics.quotes} (4 partitions)" in created.stdout
    after = runner.invoke(app, ["topics", "check", *args], env=env)
    assert after.exit_code == 0, after.output
    assert "ok: 6 topics, 4 partitions each" in after.stdout


def test_cli_unreachable_broker_exits_3() -> None:
    """`topics check` against a closed port exits 3 with a clear message."""
    result = CliRunner().invoke(
        app,
        ["topics", "check", "--bootstrap", f"127.0.0.1:{free_port()}"],
        env={"PRICING_HA__BROKER__CONNECT_TIMEOUT_MS": "1000"},
    )
    assert result.exit_code == 3
    assert "did not answer" in result.stderr
    assert "Traceback" not in result.output
