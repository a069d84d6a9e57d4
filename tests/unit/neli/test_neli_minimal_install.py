"""neli with only confluent-kafka installed: it imports and works, OpenTelemetry is optional.

Each check runs in a fresh interpreter in which every module that is neither in the standard
library nor ``neli`` / ``confluent_kafka`` cannot be imported, as if pricing-ha's other
dependencies (``opentelemetry-api`` first of all) were not installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import neli
import neli.partitioner

ROOT = Path(neli.__file__).resolve().parent.parent

#: Run with ``python -I -c SCRIPT ROOT``; prints one JSON object.
SCRIPT = r"""
import sys

ALLOWED = {"neli", "confluent_kafka"}
hidden = set()


class OnlyConfluentKafka:
    # First on sys.meta_path: a module outside the standard library and ALLOWED is not found.

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names or top in ALLOWED:
            return None
        hidden.add(top)
        raise ModuleNotFoundError(f"No module named {name!r} (hidden)", name=name)


def third_party():
    tops = {name.partition(".")[0] for name in sys.modules}
    return {top for top in tops if top not in sys.stdlib_module_names}


sys.path.insert(0, sys.argv[1])
sys.meta_path.insert(0, OnlyConfluentKafka())
before = third_party()

import asyncio
import json

import neli
import neli.clock
import neli.partitioner
import neli.takeover
import neli.wire
import neli._telemetry
from neli import Mode, Neli, NeliConfig, NeliConfigError, Variant
from neli.wire import Heartbeat
from neli.partitioner import role_partition
from neli._tracker import LeadershipTracker
from neli.testing import FakeNeli

out = {"otel": neli._telemetry._OTEL, "neli_file": neli.__file__}

config = NeliConfig(
    bootstrap_servers="127.0.0.1:9092",
    group_id="g1",
    topic="neli",
    variant=Variant.FULL,
    mode=Mode.NON_EXCLUSIVE,
    session_timeout_ms=1000,
    threshold_ms=2000,
    member_name="me",
)
out["consumer_group"] = config.consumer_settings()["group.id"]
try:
    NeliConfig(
        bootstrap_servers="127.0.0.1:9092",
        group_id="g1",
        topic="neli",
        mode=Mode.NON_EXCLUSIVE,
        session_timeout_ms=3000,
        threshold_ms=2000,  # non-exclusive needs T > S
    )
    out["bad_config"] = "accepted"
except NeliConfigError:
    out["bad_config"] = "refused"

member = Neli(config)  # nothing connects until start()
tracker = LeadershipTracker(config, member.member_id)
tracker.assign([0], now_mono=100.0)
beat = Heartbeat(
    group="g1", member_id=member.member_id, member_name="me", incarnation=0, counter=1,
    sent_mono=100.0, sent_wall=1_700_000_000.0, led=(), meta={},
)
tracker.observe(0, Heartbeat.decode(beat.encode()), publish_wall=None, now_mono=100.0)
out["tracker"] = [
    tracker.why_not(0, now_mono=101.0, now_wall=0.0),
    tracker.why_not(0, now_mono=102.5, now_wall=0.0),
]


async def drive():
    fake = FakeNeli(partitions=8, group_id="g1", member_name="me")
    tracing = neli.trace_leadership(fake)
    await fake.acquire(role_partition("EURUSD", 8))
    led = [fake.is_leader("EURUSD"), fake.is_leader("GBPUSD")]
    await fake.close()
    tracing.close()
    return {
        "tracing_enabled": tracing.enabled,
        "led": led,
        "kinds": [event.kind.value for event in fake.history],
        "meta": sorted(fake.heartbeat_meta()),
        "partition": role_partition("EURUSD", 8),
    }


out["fake"] = asyncio.run(drive())
out["hidden"] = sorted(hidden)
out["preloaded"] = sorted(before)
out["loaded"] = sorted(third_party() - before)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def minimal() -> dict[str, Any]:
    """What the script reports, run once for the module."""
    proc = subprocess.run(
        [sys.executable, "-I", "-c", SCRIPT, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return report


def test_the_script_uses_this_checkout(minimal: dict[str, Any]) -> None:
    """The fresh interpreter imported the neli under test, not another installed copy."""
    assert Path(minimal["neli_file"]).resolve() == Path(neli.__file__).resolve()


def test_opentelemetry_was_asked_for_and_hidden(minimal: dict[str, Any]) -> None:
    """neli tried to import opentelemetry, was refused, and fell back to no tracing."""
    assert "opentelemetry" not in minimal["preloaded"]
    assert "opentelemetry" in minimal["hidden"]
    assert minimal["otel"] is False


def test_neli_loads_no_third_party_module_but_confluent_kafka(minimal: dict[str, Any]) -> None:
    """Importing and using neli loads confluent_kafka and neli only, and asks for no other
    installed package than opentelemetry."""
    assert minimal["loaded"] == ["confluent_kafka", "neli"]
    asked = {name for name in minimal["hidden"] if importlib.util.find_spec(name) is not None}
    assert asked <= {"opentelemetry"}


def test_config_and_tracker_work_without_opentelemetry(minimal: dict[str, Any]) -> None:
    """NeliConfig validates and the tracker decides leadership (fresh, then stale after T)."""
    assert minimal["consumer_group"] == "g1"
    assert minimal["bad_config"] == "refused"
    assert minimal["tracker"] == [None, "heartbeats stale"]


def test_fake_member_and_tracing_work_without_opentelemetry(minimal: dict[str, Any]) -> None:
    """FakeNeli leads the partition of a role it acquired; trace_leadership is a no-op."""
    fake = minimal["fake"]
    assert fake["partition"] == neli.partitioner.role_partition("EURUSD", 8)
    assert fake["partition"] != neli.partitioner.role_partition("GBPUSD", 8)
    assert fake["led"] == [True, False]
    assert fake["kinds"] == ["acquired", "revoked"]
    assert fake["tracing_enabled"] is False
    assert fake["meta"] == ["member_id", "member_name"]
