"""``pricing-ha status --instrument SYM``: owners per group from heartbeats, over a fake broker."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException
from typer.testing import CliRunner

import pricing_ha.status
from neli.wire import Heartbeat, OwnerDirectory
from pricing_ha.cli import app
from pricing_ha.kafka.partitioning import instrument_partition
from pricing_ha.status import instrument_owners, render_owners

GROUPS = ["pricing.p1", "pricing.p2", "pricing.relay"]
M = 4
EURUSD = instrument_partition("EURUSD", M)


def _hb(group: str, member: str, led: tuple[int, ...], sent_wall: float) -> Heartbeat:
    return Heartbeat(
        group=group,
        member_id=f"{member}/1",
        member_name=member,
        incarnation=0,
        counter=int(sent_wall * 1000),
        sent_mono=sent_wall,
        sent_wall=sent_wall,
        led=led,
    )


def test_owners_per_group_with_since_and_staleness() -> None:
    """Each group names its claimants; since is exact only for runs begun after reading did."""
    d = OwnerDirectory(M, max_age_s=0.9, observed_from_wall=100.0)
    for i in range(7):  # p1/a led before the read began: its first heartbeat seen is at 100.1
        d.observe(_hb("pricing.p1", "p1/a", (EURUSD,), 100.1 + 0.3 * i))
    for t in (101.0, 101.3, 101.6):
        d.observe(_hb("pricing.p2", "p2/a", (EURUSD,), t))
    d.observe(_hb("pricing.p2", "p2/b", (EURUSD,), 101.8))  # non-exclusive overlap
    d.observe(_hb("pricing.relay", "relay/r1", ((EURUSD + 1) % M,), 101.9))
    d.observe(_hb("other.group", "x", (EURUSD,), 101.9))
    s = instrument_owners(
        d, "EURUSD", GROUPS, now_wall=102.0, window_s=2.0, clock_skew_s=0.2, new_owner_delay_s=0.3
    )
    assert s.partition == EURUSD
    by_group = {g.group: g for g in s.groups}
    assert [g.group for g in s.groups] == [*GROUPS, "other.group"]
    (p1,) = by_group["pricing.p1"].owners
    assert (p1.member, p1.since_exact, p1.since_wall) == ("p1/a", False, 100.1)
    assert p1.age_s == pytest.approx(0.1)
    assert by_group["pricing.p1"].stale_by_s == pytest.approx(0.3)
    p2 = by_group["pricing.p2"].owners
    assert [(o.member, o.since_exact) for o in p2] == [("p2/a", True), ("p2/b", True)]
    assert by_group["pricing.p2"].stale_by_s == pytest.approx(0.6)  # the older heartbeat + e
    assert by_group["pricing.relay"].owners == ()
    assert by_group["pricing.relay"].stale_by_s is None


def test_render_names_owners_gaps_and_the_bound() -> None:
    """The table says who owns, since when (or since before), no owner, and the bound."""
    d = OwnerDirectory(M, max_age_s=0.9, observed_from_wall=100.0)
    d.observe(_hb("pricing.p1", "p1/a", (EURUSD,), 100.1))
    d.observe(_hb("pricing.p2", "p2/b", (EURUSD,), 103.0))
    d.observe(_hb("pricing.p2", "p2/b", (EURUSD,), 103.3))
    s = instrument_owners(
        d, "EURUSD", GROUPS, now_wall=103.4, window_s=4.0, clock_skew_s=0.2, new_owner_delay_s=0.3
    )
    text = render_owners(s)
    assert f"instrument EURUSD: partition {EURUSD} of {M}" in text
    assert "pricing.p1" in text
    assert "no owner" in text.split("pricing.p1")[1].split("\n")[0]  # p1's claim expired
    assert "p2/b" in text
    assert "(0.4 s)" in text
    assert "pricing.relay    no owner" in text
    assert "stale by at most 0.30 s" in text


class _Msg:
    def __init__(self, value: bytes) -> None:
        self._value = value

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self._value


class _Meta:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = {
            name: type("T", (), {"partitions": dict.fromkeys(range(n)), "error": None})()
            for name, n in topics.items()
        }


class FakeConsumer:
    """A consumer over a fake NELI topic: heartbeats of live members, sent at each poll."""

    members: ClassVar[list[tuple[str, str, tuple[int, ...]]]] = []
    topics: ClassVar[dict[str, int]] = {"pricing.neli": M}
    down: ClassVar[bool] = False

    def __init__(self, _settings: dict[str, Any]) -> None:
        self.assigned: list[Any] = []
        self.polls = 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> _Meta:
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return _Meta(self.topics)

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = partitions

    def poll(self, timeout: float) -> _Msg | None:
        time.sleep(0.02)
        if not self.assigned or not self.members:
            return None
        self.polls += 1
        group, name, led = self.members[self.polls % len(self.members)]
        return _Msg(_hb(group, name, led, time.time()).encode())

    def close(self) -> None:
        pass


@pytest.fixture
def fake_broker(monkeypatch: pytest.MonkeyPatch) -> type[FakeConsumer]:
    """The status reader talks to :class:`FakeConsumer` instead of a broker."""
    monkeypatch.setattr(pricing_ha.status, "Consumer", FakeConsumer)
    monkeypatch.setattr(FakeConsumer, "members", [])
    monkeypatch.setattr(FakeConsumer, "topics", {"pricing.neli": M})
    monkeypatch.setattr(FakeConsumer, "down", False)
    return FakeConsumer


Invoke = Callable[..., Any]


@pytest.fixture
def status() -> Invoke:
    """Runs ``pricing-ha status ARGS`` with a short window and connect timeout."""

    def run(*args: str) -> Any:
        env = {"PRICING_HA__BROKER__CONNECT_TIMEOUT_MS": "400"}
        return CliRunner().invoke(app, ["status", "--window", "0.3", *args], env=env)

    return run


def test_cli_prints_the_owner_of_each_group(
    fake_broker: type[FakeConsumer], status: Invoke
) -> None:
    """--instrument --json lists every expected group with the members claiming the partition."""
    fake_broker.members = [
        ("pricing.p1", "p1/a", (EURUSD,)),
        ("pricing.p2", "p2/a", tuple(p for p in range(M) if p != EURUSD)),
        ("pricing.relay", "relay/r1", tuple(range(M))),
    ]
    result = status("--instrument", "EURUSD", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["instrument"], doc["partition"]) == ("EURUSD", EURUSD)
    owners = {g["group"]: [o["member"] for o in g["owners"]] for g in doc["groups"]}
    assert owners == {"pricing.p1": ["p1/a"], "pricing.p2": [], "pricing.relay": ["relay/r1"]}
    table = status("--instrument", "EURUSD")
    assert table.exit_code == 0, table.output
    assert "relay/r1" in table.stdout
    assert "since before" in table.stdout  # they led before the short read began


def test_cli_refuses_an_unknown_instrument(fake_broker: type[FakeConsumer], status: Invoke) -> None:
    """A symbol that is not configured exits 2 naming it (and a near match), reading nothing."""
    fake_broker.down = True  # would fail with exit 3 if it got as far as the broker
    result = status("--instrument", "eurusd")
    assert result.exit_code == 2
    assert "unknown instrument 'eurusd'" in result.stderr
    assert "did you mean EURUSD?" in result.stderr


def test_cli_reports_an_unreachable_broker(fake_broker: type[FakeConsumer], status: Invoke) -> None:
    """A broker that does not answer ends with exit 3 and the bounded-retry message."""
    fake_broker.down = True
    result = status("--instrument", "EURUSD")
    assert result.exit_code == 3
    assert "did not answer within 0.4 s" in result.stderr
    assert "Traceback" not in result.output


def test_cli_reports_a_missing_neli_topic(fake_broker: type[FakeConsumer], status: Invoke) -> None:
    """Without the NELI topic there is nothing to read: exit 4 naming the topic."""
    fake_broker.topics = {}
    result = status("--instrument", "EURUSD")
    assert result.exit_code == 4
    assert "'pricing.neli' does not exist" in result.stderr
