"""The public surfaces of ``neli`` and ``pricing_ha.wire``: exactly the names we mean to export,
sorted and importable."""

from __future__ import annotations

import importlib

import pytest

import neli
import neli.testing

EXPECTED_NELI = {
    "KAFKA_PARTITIONER",
    "SYSTEM_CLOCK",
    "BarrierHandler",
    "BrokerUnavailableError",
    "Clock",
    "EventKind",
    "Heartbeat",
    "HeartbeatDecodeError",
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
    "OwnerDirectory",
    "OwnerLookup",
    "SystemClock",
    "TaskFactory",
    "TopicError",
    "Variant",
    "murmur2",
    "role_index",
    "role_partition",
    "trace_leadership",
}
EXPECTED_TESTING = {"FakeNeli", "ManualClock"}
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
