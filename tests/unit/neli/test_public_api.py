"""The public surfaces of ``neli`` (its root, submodules and the :class:`neli.Neli` member) and
``pricing_ha.wire``: exactly the names and methods we mean to export, sorted and importable."""

from __future__ import annotations

import importlib

import pytest

import neli
import neli.testing
from neli import Neli, NeliConfig
from neli.takeover import Takeover
from neli.testing import FakeNeli, FakeTakeover

EXPECTED_NELI = {
    "BarrierHandler",
    "BrokerUnavailableError",
    "EventKind",
    "LeaderTasks",
    "LeadershipEvent",
    "LeadershipTracing",
    "Mode",
    "Neli",
    "NeliClosedError",
    "NeliConfig",
    "NeliConfigError",
    "NeliError",
    "NeliStatus",
    "Owner",
    "OwnerLookup",
    "TaskFactory",
    "TopicError",
    "Variant",
    "trace_leadership",
}
EXPECTED_NELI_WIRE = {"Heartbeat", "HeartbeatDecodeError", "OwnerDirectory"}
EXPECTED_NELI_PARTITIONER = {"KAFKA_PARTITIONER", "murmur2", "role_index", "role_partition"}
EXPECTED_NELI_CLOCK = {"SYSTEM_CLOCK", "Clock", "SystemClock"}
EXPECTED_NELI_TAKEOVER = {"Takeover"}
EXPECTED_TESTING = {"FakeNeli", "FakeTakeover", "ManualClock"}
# What a goNELI-like user calls on a member (lifecycle, leadership now, events, status); the
# relay's hand-over hooks live behind ``takeover`` (:class:`neli.takeover.Takeover`). A new
# public method is a conscious change: add it here.
EXPECTED_NELI_MEMBERS = {
    "add_barrier",
    "add_heartbeat_meta",
    "assigned_partitions",
    "close",
    "events",
    "heartbeat_errors",
    "heartbeats_rejected",
    "is_leader",
    "leads",
    "led_partitions",
    "partition_for",
    "partitions",
    "start",
    "status",
    "takeover",
    "wait",
}
EXPECTED_NELI_ATTRIBUTES = {"config", "member_id"}
EXPECTED_TAKEOVER_MEMBERS = {
    "assigned_since",
    "end_grace",
    "in_grace",
    "previous_holder_silent_s",
    "recovering",
}
EXPECTED_WIRE = {
    "CONTROL_KINDS",
    "Checkpoint",
    "ControlHeaders",
    "DeadLetterHeaders",
    "Heartbeat",
    "Price",
    "PriceHeaders",
    "Quote",
    "QuoteHeaders",
    "RawPriceHeaders",
}

MODULES = [
    pytest.param("neli", EXPECTED_NELI, id="neli"),
    pytest.param("neli.wire", EXPECTED_NELI_WIRE, id="neli.wire"),
    pytest.param("neli.partitioner", EXPECTED_NELI_PARTITIONER, id="neli.partitioner"),
    pytest.param("neli.clock", EXPECTED_NELI_CLOCK, id="neli.clock"),
    pytest.param("neli.takeover", EXPECTED_NELI_TAKEOVER, id="neli.takeover"),
    pytest.param("neli.testing", EXPECTED_TESTING, id="neli.testing"),
    pytest.param("pricing_ha.wire", EXPECTED_WIRE, id="pricing_ha.wire"),
]


def _ruff_sorted(names: list[str]) -> list[str]:
    """Ruff's RUF022 order: SCREAMING_CASE constants, then CamelCase, then everything else."""

    def key(name: str) -> tuple[int, str]:
        if name.isupper():
            return (0, name)
        if name[:1].isupper():
            return (1, name)
        return (2, name)

    return sorted(names, key=key)


@pytest.mark.parametrize(("module", "expected"), MODULES)
def test_all_is_exactly_the_intended_names(module: str, expected: set[str]) -> None:
    """__all__ lists exactly the names we mean to export, each once."""
    names = importlib.import_module(module).__all__
    assert len(names) == len(set(names))
    assert set(names) == expected


@pytest.mark.parametrize(("module", "expected"), MODULES)
def test_all_is_sorted(module: str, expected: set[str]) -> None:
    """__all__ is sorted (constants, classes, then functions, each alphabetically)."""
    names = list(importlib.import_module(module).__all__)
    assert names == _ruff_sorted(names)


@pytest.mark.parametrize(("module", "expected"), MODULES)
def test_every_exported_name_is_importable(module: str, expected: set[str]) -> None:
    """Every name in __all__ exists on the module and survives ``from module import name``."""
    mod = importlib.import_module(module)
    for name in expected:
        assert getattr(mod, name, None) is not None, f"{module}.{name} is missing"
        namespace: dict[str, object] = {}
        exec(f"from {module} import {name}", namespace)
        assert namespace[name] is getattr(mod, name)


def test_star_import_gives_exactly_all() -> None:
    """``from neli import *`` binds exactly neli.__all__."""
    namespace: dict[str, object] = {}
    exec("from neli import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(neli.__all__)


def test_testing_helpers_are_not_in_the_main_namespace() -> None:
    """Test helpers live in neli.testing, not in neli's own namespace."""
    assert not set(neli.testing.__all__) & set(neli.__all__)


def test_submodule_names_are_not_repeated_at_the_root() -> None:
    """Wire, partitioner, clock and takeover names live in their submodule only, not at the root."""
    moved = EXPECTED_NELI_WIRE | EXPECTED_NELI_PARTITIONER | EXPECTED_NELI_CLOCK
    moved |= EXPECTED_NELI_TAKEOVER
    assert not moved & set(neli.__all__)
    assert not [name for name in moved if hasattr(neli, name)]


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_neli_public_members_are_exactly_the_intended_ones() -> None:
    """Neli's public methods and properties, and its public instance attributes, are pinned."""
    assert _public(Neli) == EXPECTED_NELI_MEMBERS
    member = Neli(NeliConfig(bootstrap_servers="127.0.0.1:1", group_id="g", topic="t"))
    assert {name for name in vars(member) if not name.startswith("_")} == EXPECTED_NELI_ATTRIBUTES


def test_takeover_hooks_are_one_protocol_that_neli_and_the_fakes_implement() -> None:
    """The relay's hooks are the Takeover protocol, reached as ``neli.takeover`` on a member
    and on the fake; none of them is a method of Neli itself."""
    assert _public(Takeover) == EXPECTED_TAKEOVER_MEMBERS
    assert not EXPECTED_TAKEOVER_MEMBERS & _public(Neli)
    member = Neli(NeliConfig(bootstrap_servers="127.0.0.1:1", group_id="g", topic="t"))
    hooks: Takeover = member.takeover  # mypy checks conformance statically
    fake_hooks: Takeover = FakeNeli().takeover
    assert isinstance(hooks, Takeover)
    assert isinstance(fake_hooks, FakeTakeover)
    assert _public(FakeTakeover) >= EXPECTED_TAKEOVER_MEMBERS
    assert not EXPECTED_TAKEOVER_MEMBERS & _public(FakeNeli)
