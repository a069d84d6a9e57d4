"""The Dockerfile, .dockerignore, the image's lock and its health check, checked offline.

No Docker engine here: hadolint and checkov lint the Dockerfile, and structural tests check
what a build would do (stages, pinned bases, user, entrypoint, signals, build context).
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.unit.project.test_deploy_tools import ROOT, locked_versions, run_tool, tool

DOCKERFILE = ROOT / "Dockerfile"
IMAGE_LOCK = ROOT / "deploy" / "docker" / "requirements.txt"
HEALTHCHECK = ROOT / "deploy" / "docker" / "healthcheck.py"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, args = stripped.partition(" ")
            result.append((keyword.upper(), args.strip()))
    return result


def test_hadolint_is_clean() -> None:
    """hadolint reports nothing on the Dockerfile."""
    done = run_tool(tool("hadolint"), DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == ""


def test_checkov_passes_on_dockerfile() -> None:
    """checkov's Dockerfile checks all pass."""
    done = run_tool(
        tool("checkov"), "-f", DOCKERFILE, "--framework", "dockerfile", "--skip-download", "-o",
        "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = json.loads(done.stdout)["summary"]
    assert summary["failed"] == 0
    assert summary["passed"] > 20


def test_multi_stage_with_pinned_bases() -> None:
    """Two stages or more; every base image is an exact Python patch release (or a digest)."""
    froms = [args for kw, args in instructions() if kw == "FROM"]
    assert len(froms) >= 2
    for args in froms:
        image = args.split()[0]
        assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", image), image
    assert froms[-1].split()[-1] == "runtime"
    assert any(kw == "COPY" and args.startswith("--from=build ") for kw, args in instructions())


def test_runs_as_non_root_with_exec_form_entrypoint() -> None:
    """The final stage runs as a numeric non-root user; ENTRYPOINT is exec-form pricing-ha."""
    final = instructions()
    last_from = max(i for i, (kw, _) in enumerate(final) if kw == "FROM")
    users = [args for kw, args in final[last_from:] if kw == "USER"]
    assert users, "no USER in the runtime stage"
    uid = users[-1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) >= 1000
    entrypoints = [args for kw, args in final if kw == "ENTRYPOINT"]
    assert entrypoints == ['["pricing-ha"]']
    assert json.loads(entrypoints[0]) == ["pricing-ha"]
    assert ("STOPSIGNAL", "SIGTERM") in final
    assert not [args for kw, args in final if kw == "ADD"]


def test_healthcheck_targets_healthz() -> None:
    """HEALTHCHECK runs the bundled script, which asks /healthz on the image's health port."""
    checks = [args for kw, args in instructions() if kw == "HEALTHCHECK"]
    assert len(checks) == 1
    assert "/opt/pricing-ha/healthcheck.py" in checks[0]
    assert "/healthz" in HEALTHCHECK.read_text()
    env = " ".join(args for kw, args in instructions() if kw == "ENV")
    assert "PRICING_HA__HEALTH__HOST=0.0.0.0" in env
    for role in ("PUBLISHER", "RELAY", "SUBSCRIBER"):
        assert f"PRICING_HA__HEALTH__{role}_PORT=8080" in env


def test_installs_only_hash_pinned_dependencies() -> None:
    """The image's pip installs use --require-hashes, and pricing-ha itself --no-deps."""
    runs = " ".join(args for kw, args in instructions() if kw == "RUN")
    installs = re.findall(r"pip install[^&]*", runs)
    assert len(installs) == 3
    for command in installs:
        assert "--require-hashes" in command or "--no-deps /tmp/wheels" in command


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule, enough for our file: the last matching pattern wins, ! re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        if (
            fnmatch.fnmatch(path, body)
            or path.startswith(body + "/")
            or (body.startswith("**/") and fnmatch.fnmatch(Path(path).name, body[3:]))
        ):
            ignored = not negate
    return ignored


def test_dockerignore_sends_only_what_the_build_copies() -> None:
    """Everything COPY reads is in the context; tests, .venv and .git are not."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = []
    for kw, args in instructions():
        if kw == "COPY" and not args.startswith("--from="):
            sources += args.split()[:-1]
    assert "pricing_ha" in sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _ignored(source, patterns), f"{source} is excluded from the build context"
    for excluded in (".venv/bin/python", ".git/HEAD", "tests/unit/config/test_config.py", "out/x"):
        assert _ignored(excluded, patterns), excluded
    assert _ignored("pricing_ha/__pycache__/x.pyc", patterns)


def test_image_lock_matches_the_project_lock() -> None:
    """The image lock: runtime deps + the aws extra, hashed, same versions as lock.txt."""
    image = locked_versions(IMAGE_LOCK)
    project = locked_versions(ROOT / "requirements" / "lock.txt")
    assert "aws-msk-iam-sasl-signer-python" in image
    for name in ("confluent-kafka", "orjson", "typer", "opentelemetry-sdk", "uvloop"):
        assert name in image
    for dev_only in ("pytest", "mypy", "ruff", "checkov"):
        assert dev_only not in image
    drift = {
        n: (image[n], project[n]) for n in image.keys() & project.keys() if image[n] != project[n]
    }
    assert not drift, f"re-run scripts/deploy-tools --lock: {drift}"
    text = IMAGE_LOCK.read_text()
    assert text.count("--hash=sha256:") >= len(image)


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Silent."""


@pytest.fixture
def health_server() -> Iterator[HTTPServer]:
    """A local /healthz server on a free port, stopped after the test."""
    server = HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize(("status", "code"), [(200, 0), (503, 1)])
def test_healthcheck_script_exit_status(
    health_server: HTTPServer, monkeypatch: pytest.MonkeyPatch, status: int, code: int
) -> None:
    """The HEALTHCHECK script exits 0 on a 200 from /healthz and 1 otherwise."""
    monkeypatch.setattr(_Health, "status", status)
    port = health_server.server_address[1]
    done = subprocess.run(
        [sys.executable, str(HEALTHCHECK)],
        env={"PRICING_HA__HEALTH__PUBLISHER_PORT": str(port)},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == code, done.stderr


def test_healthcheck_script_fails_when_nothing_listens() -> None:
    """No server on the port: unhealthy, with the reason on stderr."""
    done = subprocess.run(
        [sys.executable, str(HEALTHCHECK)],
        env={"PRICING_HA_HEALTHCHECK_URL": "http://127.0.0.1:9/healthz"},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 1
    assert "unhealthy" in done.stderr


def test_image_lock_holds_every_runtime_dependency() -> None:
    """Every [project] dependency of pyproject.toml is in the image lock (a process of the image
    imports them all at start: /metrics needs prometheus-client and its OpenTelemetry exporter)."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0].lower().replace("_", "-") for dep in deps}
    missing = names - locked_versions(IMAGE_LOCK).keys()
    assert not missing, f"re-run scripts/deploy-tools --lock: {sorted(missing)}"
