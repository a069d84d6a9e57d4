"""Layering of the application: which subpackage of ``pricing_ha`` may import which.

The tree reads like the architecture, lowest layer first::

    errors, aio, (root)          no application imports
    charts, screen               (root)            (matplotlib SVG for pages; rich live views)
    config                       errors
    kafka                        config            (headers, partitioner, topic layout)
    wire                         kafka             (the records on the topics, as typed structs)
    telemetry                    kafka             (infrastructure: knows no role)
    member                       telemetry         (worker, runner, health endpoints)
    publishing, feed, dedupe     member            (feed and dedupe read publishing's formats)
    subscribing, status          dedupe            (direct mode arbitrates like the relay)
    pipeline                     kafka, publishing, charts (Spark jobs: the analytical path)
    security                     config            (the role table and its Kafka ACLs)
    local                        everything below  (local Kafka, demo: never production)
    cli                          everything

A unit may import the units listed for it (and, transitively, nothing else); nothing imports
``local`` or ``cli`` except the layers above them. Every import counts, also those inside
functions, so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import pricing_ha

APP_DIR = Path(pricing_ha.__file__).parent

_BASE = {"root", "errors", "aio"}
ALLOWED: dict[str, set[str]] = {
    "root": set(),
    "errors": set(),
    "aio": set(),
    "charts": _BASE,
    "screen": _BASE,
    "config": _BASE,
    "kafka": _BASE | {"config"},
    "wire": _BASE | {"config", "kafka"},
    "telemetry": _BASE | {"config", "kafka"},
    "member": _BASE | {"config", "kafka", "telemetry"},
    "publishing": _BASE | {"config", "kafka", "wire", "telemetry", "member"},
    "feed": _BASE | {"config", "kafka", "wire", "telemetry", "publishing"},
    "dedupe": _BASE | {"config", "kafka", "wire", "telemetry", "member", "publishing"},
    "subscribing": _BASE
    | {"config", "kafka", "wire", "telemetry", "member", "publishing", "dedupe"},
    "status": _BASE | {"config", "kafka", "wire"},
    "pipeline": _BASE | {"config", "kafka", "wire", "telemetry", "publishing", "charts"},
    "security": _BASE | {"config", "kafka"},
}
ALLOWED["local"] = set(ALLOWED) - {"local"}
ALLOWED["cli"] = set(ALLOWED) - {"cli"}


def unit_of(module: str) -> str:
    """The layering unit of a ``pricing_ha`` module: its subpackage, or top-level module."""
    parts = module.split(".")
    return "root" if len(parts) == 1 else parts[1]


def module_name(path: Path) -> str:
    """The dotted module name of a source file under ``pricing_ha/``."""
    rel = path.relative_to(APP_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def app_imports(source: str, module: str, *, is_package: bool) -> Iterator[tuple[int, str]]:
    """Each ``pricing_ha`` module that ``source`` imports (relative imports resolved)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pricing_ha":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "pricing_ha":
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                is_module = (APP_DIR.parent / candidate.replace(".", "/")).with_suffix(".py")
                is_pkg = APP_DIR.parent / candidate.replace(".", "/") / "__init__.py"
                yield node.lineno, candidate if is_module.exists() or is_pkg.exists() else target


def _graph() -> dict[str, list[tuple[int, str]]]:
    graph = {}
    for path in sorted(APP_DIR.rglob("*.py")):
        name = module_name(path)
        graph[name] = list(
            app_imports(
                path.read_text(encoding="utf-8"), name, is_package=path.name == "__init__.py"
            )
        )
    return graph


def test_every_source_file_belongs_to_a_known_unit() -> None:
    """Each module of pricing_ha sits in a unit the layering table names."""
    unknown = sorted({unit_of(name) for name in _graph()} - set(ALLOWED))
    assert unknown == []


def test_units_import_only_the_layers_below_them() -> None:
    """No module imports a subpackage its layer may not use (telemetry never the application)."""
    offences = [
        f"{name}:{line} imports {target}"
        for name, imports in _graph().items()
        for line, target in imports
        if unit_of(target) != unit_of(name) and unit_of(target) not in ALLOWED[unit_of(name)]
    ]
    assert offences == []


def _cycle(graph: dict[str, list[tuple[int, str]]]) -> list[str] | None:
    edges = {name: sorted({t for _, t in imports if t in graph}) for name, imports in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in edges[node]:
            # a package's __init__ importing its own submodules is how facades work
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_no_import_cycles_between_modules() -> None:
    """The module import graph (lazy imports included) has no cycle."""
    assert _cycle(_graph()) is None


def test_cycle_finder_finds_a_planted_cycle() -> None:
    """The cycle check reports a cycle when there is one (it cannot pass vacuously)."""
    graph = {
        "pricing_ha.a": [(1, "pricing_ha.b")],
        "pricing_ha.b": [(1, "pricing_ha.c")],
        "pricing_ha.c": [(3, "pricing_ha.a")],
    }
    assert _cycle(graph) == ["pricing_ha.a", "pricing_ha.b", "pricing_ha.c", "pricing_ha.a"]


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        (
            "from pricing_ha.dedupe import arbitration",
            "pricing_ha.x",
            "pricing_ha.dedupe.arbitration",
        ),
        ("from pricing_ha.config import AppConfig", "pricing_ha.x", "pricing_ha.config"),
        ("import pricing_ha.kafka.topics", "pricing_ha.x", "pricing_ha.kafka.topics"),
        (
            "from .worker import PartitionWorker",
            "pricing_ha.member.runner",
            "pricing_ha.member.worker",
        ),
        (
            "def f():\n    from pricing_ha.local import demo",
            "pricing_ha.x",
            "pricing_ha.local.demo",
        ),
    ],
)
def test_import_reader_resolves_modules(source: str, module: str, expected: str) -> None:
    """Absolute, relative and lazy imports resolve to the module they load."""
    assert [t for _, t in app_imports(source, module, is_package=False)] == [expected]


def test_production_code_never_imports_local_tooling() -> None:
    """Only the CLI (and local itself) may import the demo/local-broker tooling."""
    users = sorted(
        {
            unit_of(name)
            for name, imports in _graph().items()
            for _, target in imports
            if unit_of(target) == "local"
        }
    )
    assert set(users) <= {"local", "cli"}
