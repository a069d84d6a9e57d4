"""Every benchmark is a module of the ``bench`` package run as ``python -m bench.<claim>`` or
``python -m bench.<claim>.<script>``: each answers ``--help`` without measuring anything, each
claim package runs its main benchmark, and ``bench/README.md`` gives every claim's command."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import bench

BENCH = Path(__file__).resolve().parents[2] / "bench"
ROOT = BENCH.parent


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _entry_modules() -> list[str]:
    """Modules with a ``__main__`` block: the benchmarks and the processes they start."""
    return sorted(
        _module(p)
        for p in BENCH.rglob("*.py")
        if p.name != "__main__.py" and 'if __name__ == "__main__":' in p.read_text()
    )


def _claims() -> list[str]:
    return sorted(p.parent.name for p in BENCH.glob("*/__main__.py"))


def test_bench_is_a_package_without_path_games() -> None:
    """Every folder of bench/ is a package, and no module edits sys.path to find another."""
    for folder in [BENCH, *(p for p in BENCH.iterdir() if p.is_dir() and p.name != "results")]:
        if folder.name != "__pycache__":
            assert (folder / "__init__.py").is_file(), folder
    offenders = [p for p in BENCH.rglob("*.py") if "sys.path" in p.read_text()]
    assert offenders == []


def test_there_are_claims_and_entry_points_to_check() -> None:
    """The discovery below finds the claim packages and their scripts (no vacuous pass)."""
    assert {"relay_failover", "price_path", "neli", "broker"} <= set(_claims())
    assert "bench.relay_failover.takeover" in _entry_modules()


class _ProcessStartedError(RuntimeError):
    pass


def _refuse(*_args: Any, **_kwargs: Any) -> None:
    raise _ProcessStartedError("--help must not start a process")


@pytest.mark.parametrize("name", _entry_modules())
def test_each_entry_point_answers_help_without_running(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``main()`` with ``--help`` prints its usage and exits 0, starting no process."""
    module = importlib.import_module(name)
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse)
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    with pytest.raises(SystemExit) as exit_:
        module.main()
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


@pytest.mark.parametrize("claim", _claims())
def test_each_claim_runs_as_python_dash_m(claim: str) -> None:
    """``python -m bench.<claim> --help`` works from the repository root."""
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{claim}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m bench.{claim} ")


def test_the_readme_gives_every_claims_command_and_only_real_ones() -> None:
    """bench/README.md names ``python -m bench.<claim>`` for every claim, and each module it
    names exists."""
    readme = (BENCH / "README.md").read_text()
    named = set(re.findall(r"python -m (bench(?:\.\w+)+)", readme))
    for claim in _claims():
        assert f"bench.{claim}" in named, claim
    for module in named:
        assert importlib.util.find_spec(module) is not None, module


def test_helpers_started_as_modules_run_from_any_working_directory(tmp_path: Path) -> None:
    """A benchmark runs in a temporary directory; the helpers it starts with ``-m bench...``
    still find the package, through the PYTHONPATH that importing ``bench`` sets."""
    env = {**os.environ}
    assert bench.ROOT in env["PYTHONPATH"].split(os.pathsep)
    done = subprocess.run(
        [sys.executable, "-m", "bench.price_path.forwarder", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
