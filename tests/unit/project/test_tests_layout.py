"""The tests mirror the packages: a module's unit tests are found by its package's path.

``tests/unit/<pkg>/`` holds the unit tests of ``neli/`` (``neli``) or of ``pricing_ha/<pkg>/``;
``tests/unit/project/`` holds the top-level modules' tests and the checks of the project as a
whole (layering, docs, deploy files, this one). ``tests/sim/`` has one folder per simulator and
``tests/integration/`` one per area; every folder is a package, so equal basenames never clash.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
ROOT = TESTS.parent
CROSS_CUTTING = "project"
SIMULATORS = {"neli_group", "relay"}
#: What may sit directly in a folder whose tests live in sub-folders.
PACKAGE_FILES = {"__init__.py", "conftest.py"}


def _folders(top: Path) -> list[Path]:
    return sorted(d for d in top.iterdir() if d.is_dir() and d.name != "__pycache__")


def _loose(top: Path, allowed: set[str]) -> list[str]:
    return sorted(p.name for p in top.glob("*.py") if p.name not in allowed)


def _package_names() -> set[str]:
    apps = {d.name for d in _folders(ROOT / "pricing_ha") if (d / "__init__.py").is_file()}
    return apps | {"neli"}


def test_every_unit_folder_names_a_package_or_is_the_cross_cutting_one() -> None:
    """tests/unit/<pkg>/ exists only for a package that exists (or the cross-cutting folder)."""
    names = {d.name for d in _folders(TESTS / "unit")}
    assert names - _package_names() - {CROSS_CUTTING} == set()
    assert CROSS_CUTTING in names


def test_no_test_module_sits_loose_in_tests_unit() -> None:
    """tests/unit/ holds folders only: every test and helper module is in one of them."""
    assert _loose(TESTS / "unit", {"__init__.py"}) == []


def test_unit_folders_are_flat() -> None:
    """A package's tests are one folder deep: tests/unit/<pkg>/test_*.py, no deeper."""
    deeper = [str(d.relative_to(TESTS)) for f in _folders(TESTS / "unit") for d in _folders(f)]
    assert deeper == []


def test_the_simulations_are_split_by_simulator() -> None:
    """tests/sim/ has one folder per simulator and only the shared conftest loose."""
    assert {d.name for d in _folders(TESTS / "sim")} == SIMULATORS
    assert _loose(TESTS / "sim", PACKAGE_FILES) == []


def test_no_integration_test_sits_loose() -> None:
    """tests/integration/ keeps shared helpers at its top and every test module in an area."""
    assert sorted(p.name for p in (TESTS / "integration").glob("test_*.py")) == []


def test_every_test_folder_is_a_package() -> None:
    """Each folder under unit, sim and integration has an __init__.py (basenames may repeat)."""
    missing = [
        str(d.relative_to(TESTS))
        for suite in ("unit", "sim", "integration")
        for d in [TESTS / suite, *(TESTS / suite).rglob("*")]
        if d.is_dir() and d.name != "__pycache__" and not (d / "__init__.py").is_file()
    ]
    assert missing == []
