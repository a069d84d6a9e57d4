"""The servers of ``bench/election/peers.py``: prerequisites, ZooKeeper, etcd and Apache Kafka.

Each server is a child process started here on free 127.0.0.1 ports with its data in the case's
temporary directory, and stopped by PID when its ``with`` block ends (its :class:`ProcessGroup`
also stops it at interpreter exit). No system service is used or touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
PEERS_VENV = ROOT / ".venv-bench-peers"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"
PEERS_PIP = ("kazoo", "etcd3", "protobuf<4")
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE = Path("/usr/share/java/slf4j-simple.jar")


def missing_prerequisites() -> dict[str, str]:
    """What each peer lacks on this machine (``{peer: reason}``; absent peers are ready)."""
    missing: dict[str, str] = {}
    clients_ok = PEERS_PYTHON.exists()
    if not shutil.which("java") or not ZOOKEEPER_JAR.exists():
        missing["zookeeper"] = f"no java or no {ZOOKEEPER_JAR} (apt-get install zookeeper)"
    elif not clients_ok or not _imports(PEERS_PYTHON, "kazoo"):
        missing["zookeeper"] = f"no kazoo in {PEERS_VENV} (see the docstring)"
    if not shutil.which("etcd"):
        missing["etcd"] = "no etcd binary (apt-get install etcd-server)"
    elif not clients_ok or not _imports(PEERS_PYTHON, "etcd3"):
        missing["etcd"] = f"no working etcd3 in {PEERS_VENV} (see the docstring)"
    return missing


def _imports(python: Path, module: str) -> bool:
    done = subprocess.run(
        [str(python), "-c", f"import {module}"], capture_output=True, check=False, timeout=60
    )
    return done.returncode == 0


def install() -> None:
    """Install the servers from Debian and the Python clients into ``.venv-bench-peers``."""
    packages = []
    if not shutil.which("java") or not ZOOKEEPER_JAR.exists():
        packages.append("zookeeper")
    if not shutil.which("etcd"):
        packages.append("etcd-server")
    if packages:
        print(f"installing {' '.join(packages)} with apt-get", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", *packages], check=True, env=env)
    if not PEERS_PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    if not (_imports(PEERS_PYTHON, "kazoo") and _imports(PEERS_PYTHON, "etcd3")):
        print(f"installing {' '.join(PEERS_PIP)} into {PEERS_VENV}", flush=True)
        pip = [str(PEERS_PYTHON), "-m", "pip", "install", "-q", *PEERS_PIP]
        subprocess.run(pip, check=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    """A running server: its PID (for CPU) and how candidates reach it."""

    name: str
    pid: int
    address: str
    extra: dict[str, str] = field(default_factory=dict)


def _ready_or_fail(proc: Proc, ready: Callable[[], bool], what: str, timeout_s: float) -> None:
    if not wait_until(lambda: ready() or not proc.alive(), timeout_s, poll_s=0.2) or not ready():
        raise RuntimeError(f"{what} did not start:\n{proc.log_tail(30)}")


def _zk_ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 1.0) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


@contextlib.contextmanager
def zookeeper(procs: ProcessGroup, workdir: Path, tick_ms: int) -> Iterator[Server]:
    """A standalone ZooKeeper on 127.0.0.1 with its data in ``workdir``, stopped at the end."""
    port = free_port()
    data = workdir / "zk-data"
    data.mkdir()
    cfg = workdir / "zoo.cfg"
    cfg.write_text(
        f"tickTime={tick_ms}\ndataDir={data}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n"  # no Jetty admin server on port 8080
    )
    classpath = f"{ZOOKEEPER_JAR}:{SLF4J_SIMPLE}" if SLF4J_SIMPLE.exists() else str(ZOOKEEPER_JAR)
    argv = [
        "java", "-Xmx512m", "-Dzookeeper.4lw.commands.whitelist=ruok",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg),
    ]  # fmt: skip
    proc = procs.spawn("zookeeper", argv)
    try:
        _ready_or_fail(proc, lambda: _zk_ruok(port), "ZooKeeper", 60)
        yield Server("zookeeper", proc.pid, f"127.0.0.1:{port}")
    finally:
        proc.stop(10)
        shutil.rmtree(data, ignore_errors=True)


def _etcd_healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def etcd(procs: ProcessGroup, workdir: Path, flags: list[str]) -> Iterator[Server]:
    """A single-node etcd on 127.0.0.1 with its data in ``workdir``, stopped at the end."""
    client, peer = free_port(), free_port()
    c_url, p_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    argv = [
        "etcd", "--name", "bench", "--data-dir", str(workdir / "etcd-data"),
        "--listen-client-urls", c_url, "--advertise-client-urls", c_url,
        "--listen-peer-urls", p_url, "--initial-advertise-peer-urls", p_url,
        "--initial-cluster", f"bench={p_url}", *flags,
    ]  # fmt: skip
    proc = procs.spawn("etcd", argv)
    try:
        _ready_or_fail(proc, lambda: _etcd_healthy(client), "etcd", 60)
        yield Server("etcd", proc.pid, f"127.0.0.1:{client}")
    finally:
        proc.stop(10)
        shutil.rmtree(workdir / "etcd-data", ignore_errors=True)  # its WAL preallocates 64 MB


@contextlib.contextmanager
def kafka(workdir: Path) -> Iterator[Server]:
    """A local Apache Kafka (one node), with a fresh one-partition topic per case made by the
    case."""
    with LocalKafka(workdir=workdir / "kafka", keep_workdir=True) as broker:
        yield Server("kafka", broker.pid, broker.bootstrap)
