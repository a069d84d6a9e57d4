"""The demo's fault schedule: one node as it always was; three nodes add broker and AZ faults."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.demo import _Run
from pricing_ha.local.demo_faults import Zones
from pricing_ha.local.demo_view import LiveView


def _run(nodes: int | None) -> _Run:
    cluster = cast(PricingCluster, SimpleNamespace(topics={"prices": "prices-x"}, members={}))
    kafka = None if nodes is None else cast(LocalKafka, SimpleNamespace(nodes=[0] * nodes))
    return _Run(cluster, cast(LiveView, None), lambda _line: None, kafka)


@pytest.mark.parametrize("nodes", [None, 1])
def test_one_node_schedule_is_the_demo_it_always_was(nodes: int | None) -> None:
    """No broker of our own, or one node: the five faults at their fixed fractions, no broker
    fault."""
    d, s = 45.0, 3.0
    got = [(round(t, 6), label) for t, label, _ in _run(nodes).schedule(d, s)]
    assert got == [
        (round(0.12 * d, 6), "kill p1-a"),
        (round(0.22 * d, 6), "new p1"),
        (round(0.30 * d, 6), "lose p2"),
        (round(0.30 * d + 2 * s, 6), "restart p2"),
        (round(0.55 * d, 6), "kill relay"),
        (round(0.55 * d + 2 * s, 6), "new relay"),
        (round(0.75 * d, 6), "pause p1"),
        (round(0.75 * d + 2 * s, 6), "resume p1"),
    ]


@pytest.mark.parametrize(("duration", "session_s"), [(45.0, 3.0), (30.0, 3.0), (90.0, 6.0)])
def test_three_node_schedule_adds_broker_kill_and_az_a_without_overlap(
    duration: float, session_s: float
) -> None:
    """Three nodes: a broker SIGKILL (then restart) and AZ a lost (then back) join the faults;
    each lasting fault ends before the next one strikes, and all before the feed ends."""
    run = _run(3)
    plan = run.schedule(duration, session_s)
    labels = [label for _, label, _ in plan]
    assert labels == [
        "kill p1-a",
        "new p1",
        "lose p2",
        "restart p2",
        "kill broker",
        "restart broker",
        "kill relay",
        "new relay",
        "pause p1",
        "resume p1",
        "lose AZ a",
        "heal AZ a",
    ]
    times = [t for t, _, _ in plan]
    assert times == sorted(times)
    assert len(set(times)) == len(times)  # an end never coincides with the next fault
    assert times[0] > 0
    assert times[-1] < duration
    assert run.hold_s == pytest.approx(min(2 * session_s, 0.8 * duration / 7.5))


def test_zones_place_p1_in_a_p2_in_b_and_a_replacement_where_its_predecessor_stood() -> None:
    """P1's members are AZ a's, P2's AZ b's; r1 is in a, r2 in b; r3 replacing r2 is in b."""
    zones = Zones()
    assert [zones.zone(n) for n in ("p1-c", "p2-a", "relay-r1", "relay-r2")] == list("abab")
    assert zones.zone("relay-r3") is None
    zones.replaced("relay-r3", "relay-r2")
    assert zones.zone("relay-r3") == "b"
    assert zones.zone("feed") is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "2"], "1 or 3"),
        (["--nodes", "3", "--bootstrap", "127.0.0.1:1"], "drop --bootstrap"),
    ],
)
def test_demo_command_refuses_other_node_counts_and_a_foreign_broker(
    args: list[str], message: str
) -> None:
    """Two nodes, or three on a broker it did not start (it could not kill one): exit 2,
    before anything starts."""
    from typer.testing import CliRunner

    from pricing_ha.cli import app

    result = CliRunner().invoke(app, ["demo", *args])
    assert result.exit_code == 2
    assert message in result.output
