"""Roles the broker enforces: SASL/SCRAM over TLS, the standard authorizer and the role table.

One secured local Apache Kafka for the module (its users and ACLs are those of the role table,
for the default names). Each role runs its real command as its own principal; what a role may
not do is tried with a bare client of that principal and refused by the broker.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pricing_ha.config import AppConfig
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import pricing_cli
from pricing_ha.local.kafka_node import free_port
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.secured import ADMIN

PARTITIONS = 2
TOPICS = AppConfig().topics


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A secured one-node cluster for this module, its topics made by the ``topics`` role."""
    workdir = tmp_path_factory.mktemp("kafka-secured")
    with LocalKafka(workdir=workdir / "kafka", secured=True) as kafka:
        config = _config(kafka, "topics", workdir)
        done = subprocess.run(
            [*pricing_cli(), "topics", "create", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        yield kafka


def _config(kafka: LocalKafka, role: str, workdir: Path, *, password: Path | None = None) -> Path:
    """A configuration file for ``role`` on the secured cluster (its own password file)."""
    assert kafka.secured is not None
    path = workdir / f"{role}-{uuid.uuid4().hex[:6]}.toml"
    lines = [
        "[broker]",
        f'bootstrap_servers = "{kafka.bootstrap}"',
        "connect_timeout_ms = 8000",
        'auth = "scram"',
        f'sasl_username = "{role}"',
        f'sasl_password_file = "{password or kafka.secured.password_file(role)}"',
        f'ssl_ca_file = "{kafka.secured.ca_file}"',
        "[topics]",
        f"partitions = {PARTITIONS}",
        "[telemetry]",
        f'traces_dir = "{workdir / "traces"}"',
        "price_sample_ratio = 1.0",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cli_as(
    kafka: LocalKafka, user: str, workdir: Path, *args: str, password: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``pricing-ha ARGS`` as ``user`` (its own password file unless ``password``), waited for."""
    config = _config(kafka, user, workdir, password=password)
    return subprocess.run(
        [*pricing_cli(), *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _as(kafka: LocalKafka, role: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings of a bare client of ``role``."""
    return {**kafka.client_settings(role), "log_level": 0, **extra}


def _read(kafka: LocalKafka, topic: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every keyed committed record on ``topic``, read as admin."""
    consumer = Consumer(
        _as(kafka, ADMIN, **{"group.id": "admin-reader", "isolation.level": "read_committed"})
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out = []
    try:
        idle_until = time.monotonic() + 3.0
        while time.monotonic() < idle_until:
            for msg in consumer.consume(500, 0.3):
                key, value = msg.key(), msg.value()
                if msg.error() is None and isinstance(key, bytes) and isinstance(value, bytes):
                    out.append((key, value))
                    idle_until = time.monotonic() + 1.5
    finally:
        consumer.close()
    return out


def _lands(kafka: LocalKafka, topic: str, value: bytes, *, timeout_s: float) -> bool:
    """Whether a record with ``value`` is on ``topic`` within ``timeout_s`` (read as admin)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if any(v == value for _k, v in _read(kafka, topic)):
            return True
        if time.monotonic() > deadline:
            return False


def _read_prices(kafka: LocalKafka) -> list[tuple[str, int]]:
    """(instrument, seq) of every committed price on ``prices``, read as admin."""
    values = [json.loads(v) for _k, v in _read(kafka, TOPICS.prices)]
    return [(v["instrument"], int(v["seq"])) for v in values]


def _denied_produce(
    kafka: LocalKafka, role: str, topic: str, value: bytes = b"forged"
) -> KafkaError | None:
    """Produce one record to ``topic`` as ``role`` (not idempotently); the delivery error."""
    producer = Producer(_as(kafka, role, **{"message.timeout.ms": 10_000, "acks": "all"}))
    result: list[KafkaError | None] = []
    producer.produce(topic, value, key=b"EURUSD", on_delivery=lambda e, _m: result.append(e))
    producer.flush(15)
    assert result, "no delivery report within 15 s"
    return result[0]


def _group_error(kafka: LocalKafka, role: str, group: str, topic: str) -> KafkaError | None:
    """Join ``group`` on ``topic`` as ``role``; the first error polled (within 15 s)."""
    consumer = Consumer(_as(kafka, role, **{"group.id": group, "session.timeout.ms": 6000}))
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is not None and msg.error() is not None:
                return msg.error()
            if consumer.assignment():
                return None
    finally:
        consumer.close()
    raise AssertionError(f"{role} neither joined {group} nor got an error in 15 s")


def test_each_role_works_with_its_acls_alone(secured: LocalKafka, tmp_path: Path) -> None:
    """feed, p1, p2, relay (transactions), subscriber and status each run as their own principal
    (the topics role made the topics): every quote reaches prices exactly once, a bad quote and
    a bad raw price reach their DLQs, and no password is in any log, span or metric."""
    kafka = secured
    assert kafka.secured is not None
    relay_port = free_port()
    with ProcessGroup(tmp_path / "logs") as procs:

        def cli(role: str, name: str, *args: str) -> Any:
            config = _config(kafka, role, tmp_path)
            return procs.spawn(name, [*pricing_cli(), *args, "--config", str(config)])

        members = [
            cli("p1", "p1-a", "run", "--group", "p1", "--member", "a"),
            cli("p2", "p2-a", "run", "--group", "p2", "--member", "a"),
        ]
        relay_cfg = _config(kafka, "relay", tmp_path)
        with relay_cfg.open("a", encoding="utf-8") as f:
            f.write(f"[health]\nrelay_port = {relay_port}\n")
        members.append(
            procs.spawn(
                "relay-r1",
                [*pricing_cli(), "dedupe", "--member", "r1", "--config", str(relay_cfg)],
            )
        )
        summary = tmp_path / "feed.json"
        feed = cli(
            "feed", "feed", "feed", "--instruments=4", "--rate=10", "--duration=4",
            f"--summary-out={summary}",
        )  # fmt: skip
        # Records each role must dead-letter: the DLQs are written with its rights alone.
        assert _denied_produce(kafka, "feed", TOPICS.quotes, b"not a quote") is None
        assert _denied_produce(kafka, "p1", TOPICS.raw, b"not a price") is None
        assert feed.wait(90) == 0, feed.log_tail()
        fed = json.loads(summary.read_text())["instruments"]
        expected = {(i, s) for i, t in fed.items() for s in range(1, int(t["last_seq"]) + 1)}
        deadline = time.monotonic() + 90
        got: list[tuple[str, int]] = []
        while time.monotonic() < deadline and set(got) != expected:
            got = _read_prices(kafka)
        logs = "\n".join(f"--- {m.name}\n{m.log_tail(15)}" for m in members)
        assert set(got) == expected, f"missing {sorted(expected - set(got))[:10]}\n{logs}"
        assert len(got) == len(expected), "a price was delivered twice"
        for dlq, bad in ((TOPICS.dlq, b"not a quote"), (TOPICS.raw_dlq, b"not a price")):
            assert _lands(kafka, dlq, bad, timeout_s=30), f"{bad!r} not on {dlq}\n{logs}"
        sub_out = tmp_path / "subscriber.json"
        sub = cli(
            "subscriber", "subscriber", "subscribe", "--from-beginning", "--duration=6",
            f"--summary-out={sub_out}",
        )  # fmt: skip
        assert sub.wait(60) == 0, sub.log_tail()
        verdict = json.loads(sub_out.read_text())
        assert verdict["delivered"] == len(expected), verdict
        status = cli("status", "status", "status", "--json")
        assert status.wait(60) == 0, status.log_tail()
        assert "pricing.relay" in status.log_tail(200)
        with urllib.request.urlopen(f"http://127.0.0.1:{relay_port}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        assert all(m.alive() for m in members), logs
    texts = [metrics]
    texts += [p.read_text(errors="replace") for p in (tmp_path / "logs").glob("*.log")]
    traces = [p for p in (tmp_path / "traces").rglob("*") if p.is_file()]
    assert traces, "no trace file written"
    texts += [p.read_text(errors="replace") for p in traces]
    assert len(texts) > 5
    texts.append(repr(kafka.secured))
    for password in kafka.secured.passwords.values():
        assert not any(password in t for t in texts)


def test_a_subscriber_cannot_write_prices_or_join_a_neli_group(secured: LocalKafka) -> None:
    """As subscriber: producing to prices and joining the publishers' NELI group are refused."""
    err = _denied_produce(secured, "subscriber", TOPICS.prices)
    assert err is not None
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = _group_error(secured, "subscriber", "pricing.p1", TOPICS.neli)
    assert err is not None
    assert err.code() in {
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }


def test_a_publisher_cannot_write_prices_nor_use_the_other_groups_group(
    secured: LocalKafka,
) -> None:
    """As p1: producing to prices is refused, and so is joining p2's NELI group."""
    err = _denied_produce(secured, "p1", TOPICS.prices)
    assert err is not None
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = _group_error(secured, "p1", "pricing.p2", TOPICS.neli)
    assert err is not None
    assert err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _denied_produce(secured, "p1", TOPICS.raw) is None  # what it may do, it can


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--group", "p1"],
        ["dedupe"],
        ["subscribe", "--duration", "5"],
        ["feed"],
        ["status"],
        ["topics", "create"],
    ],
    ids=lambda c: c[0],
)
def test_a_wrong_password_is_one_line_and_exit_3(
    secured: LocalKafka, tmp_path: Path, command: list[str]
) -> None:
    """With a wrong password each role command exits 3 with one stderr line naming the refusal."""
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n", encoding="utf-8")
    role = {
        "run": "p1",
        "dedupe": "relay",
        "subscribe": "subscriber",
        "feed": "feed",
        "status": "status",
        "topics": "topics",
    }[command[0]]
    began = time.monotonic()
    done = _cli_as(secured, role, tmp_path, *command, password=wrong)
    took = time.monotonic() - began
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: the broker at {secured.bootstrap} refused"), lines
    assert f"user '{role}'" in lines[0]
    assert "not-the-password" not in done.stderr + done.stdout
    assert took < 8, f"took {took:.1f} s: the refusal should not wait out the connect timeout"


def test_three_secured_nodes_replicate_as_admin_over_scram_and_mutual_tls(tmp_path: Path) -> None:
    """Three secured nodes (brokers as admin over SCRAM, controllers over mutual TLS) form a
    cluster, and the feed's acks=all writes reach three replicas."""
    with LocalKafka(nodes=3, workdir=tmp_path / "kafka", secured=True) as kafka:
        admin = AdminClient(_as(kafka, ADMIN))
        for future in admin.create_topics([NewTopic(TOPICS.quotes, 2, 3)]).values():
            future.result(timeout=30)
        producer = Producer(_as(kafka, "feed", **{"enable.idempotence": True, "acks": "all"}))
        results: list[KafkaError | None] = []
        for i in range(10):
            producer.produce(
                TOPICS.quotes, b"q", key=b"%d" % i, on_delivery=lambda e, _m: results.append(e)
            )
        producer.flush(30)
        assert results == [None] * 10
        meta = admin.list_topics(TOPICS.quotes, timeout=10).topics[TOPICS.quotes]
        assert all(len(p.isrs) == 3 for p in meta.partitions.values())


def test_acls_apply_is_refused_to_a_role_and_done_by_the_admin(
    secured: LocalKafka, tmp_path: Path
) -> None:
    """`pricing-ha acls --apply` as p1 is refused in one line (exit 1); as admin it creates them."""

    refused = _cli_as(secured, "p1", tmp_path, "acls", "--apply")
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("error: the broker refused the ACLs"), lines
    done = _cli_as(secured, ADMIN, tmp_path, "acls", "--apply")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: "), done.stdout


def test_a_mark_reset_is_written_by_the_operator_and_refused_to_a_subscriber(
    secured: LocalKafka, tmp_path: Path
) -> None:
    """`pricing-ha reset-mark` as operator writes its record to prices; as subscriber it fails."""

    done = _cli_as(secured, "operator", tmp_path, "reset-mark", "EURUSD")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reset of EURUSD written to prices" in done.stdout
    refused = _cli_as(secured, "subscriber", tmp_path, "reset-mark", "EURUSD")
    assert refused.returncode != 0, refused.stdout
    assert "written" not in refused.stdout


async def test_readiness_checks_the_broker_over_scram_and_tls(
    secured: LocalKafka, tmp_path: Path
) -> None:
    """/readyz's broker check authenticates like the role's clients: ready with the role's
    password, not ready (naming the refusal) with a wrong one."""
    from pricing_ha.config import load_config
    from pricing_ha.member.health import broker_check

    good = load_config(_config(secured, "p1", tmp_path), {})
    assert await broker_check(good)() is True
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n", encoding="utf-8")
    bad = load_config(_config(secured, "p1", tmp_path, password=wrong), {})
    with pytest.raises(ConnectionError, match="no broker of"):
        await broker_check(bad)()
