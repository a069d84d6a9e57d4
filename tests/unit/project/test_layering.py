"""Layering: the ``neli`` library never imports the application or its heavy dependencies."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import neli

#: Module prefixes ``neli`` must not import. ``opentelemetry`` itself (the API) is allowed.
FORBIDDEN = ("pricing_ha", "pyspark", "uvloop", "typer", "opentelemetry.sdk")

NELI_DIR = Path(neli.__file__).parent


def _is_forbidden(module: str) -> bool:
    return any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN)


def _imports(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """Each absolute import in a tree (``importlib`` calls included): its line and the modules
    it may load, most general first."""
    found: list[tuple[int, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, [alias.name]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from opentelemetry import sdk`` loads the module opentelemetry.sdk.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.append((node.lineno, [node.module, *names]))
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
        ):
            found.append((node.lineno, [node.args[0].value]))
    return found


def forbidden_imports(source: str, filename: str) -> list[str]:
    """Describe each forbidden import in ``source`` as ``file:line imports module``."""
    tree = ast.parse(source, filename=filename)
    offences = []
    for line, modules in _imports(tree):
        bad = [module for module in modules if _is_forbidden(module)]
        if bad:
            offences.append(f"{filename}:{line} imports {bad[0]}")
    return offences


def _neli_sources() -> list[Path]:
    return sorted(NELI_DIR.rglob("*.py"))


def test_neli_sources_are_found() -> None:
    """The walk sees neli's modules (a walk that finds nothing would pass vacuously)."""
    names = {path.name for path in _neli_sources()}
    assert {"__init__.py", "_tracker.py", "_runtime.py", "testing.py"} <= names


def test_neli_imports_nothing_forbidden() -> None:
    """No module under neli/ imports pricing_ha, pyspark, uvloop, typer or the OTel SDK."""
    offences = [
        offence
        for path in _neli_sources()
        for offence in forbidden_imports(
            path.read_text(encoding="utf-8"), str(path.relative_to(NELI_DIR.parent))
        )
    ]
    assert offences == []


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import pricing_ha", "pricing_ha"),
        ("from pricing_ha.config import load", "pricing_ha.config"),
        ("import pyspark.sql as ps", "pyspark.sql"),
        ("import os, uvloop", "uvloop"),
        ("def main():\n    import typer", "typer"),
        ("from opentelemetry.sdk.trace import TracerProvider", "opentelemetry.sdk.trace"),
        ("from opentelemetry import sdk", "opentelemetry.sdk"),
        ("import importlib\nimportlib.import_module('uvloop')", "uvloop"),
        ("__import__('pyspark')", "pyspark"),
    ],
)
def test_helper_reports_the_offending_module_and_import(source: str, module: str) -> None:
    """The checker flags each kind of forbidden import, naming the file, line and module."""
    offences = forbidden_imports(source, "neli/_bad.py")
    assert len(offences) == 1
    assert offences[0].startswith("neli/_bad.py:")
    assert offences[0].endswith(f"imports {module}")


@pytest.mark.parametrize(
    "source",
    [
        "from opentelemetry import trace",
        "import opentelemetry.trace",
        "from opentelemetry.trace import Tracer",
        "import confluent_kafka",
        "from neli._config import NeliConfig",
        "from . import _config",
        "import typer_helpers",
        "import uvloopish",
    ],
)
def test_helper_allows_the_opentelemetry_api_and_lookalikes(source: str) -> None:
    """The OpenTelemetry API, relative imports and similarly named modules are not flagged."""
    assert forbidden_imports(source, "neli/_ok.py") == []
