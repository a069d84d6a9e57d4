"""A local Apache Kafka (KRaft mode) for the demo, the tests and the benchmarks.

:class:`LocalKafka` runs one or three combined broker+controller JVMs on ``127.0.0.1`` from the
jars that ``scripts/jars`` resolves (``.jars/kafka/libs``; ``PRICING_HA_KAFKA_LIBS`` points
elsewhere). Each node has its own log directory under the work directory, so a node that is
killed and started again comes back with its data, as a real broker does. The cluster is ready
once every node answers a metadata request naming this cluster's id and all of its brokers.

Three nodes stand in racks ``a``, ``b`` and ``c`` with replication factor 3 and
``min.insync.replicas = 2`` for every topic (the internal ones included), so that one node, or the
AZ it stands in, can be lost without losing a write. Settings favour fast local fail-over; what
MSK uses instead is in docs/architecture.md (#7-the-local-apache-kafka).

The nodes are separate processes so that fault tests can pause (SIGSTOP), kill and restart them
and observe what real clients do.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.procs import freeze

__all__ = ["KAFKA_LIBS_ENV", "KafkaNode", "LocalKafka", "kafka_libs", "run_foreground"]

KAFKA_LIBS_ENV = "PRICING_HA_KAFKA_LIBS"
_LOG_TAIL_BYTES = 4000
_RACKS = ("a", "b", "c")

# Fast local fail-over: no delay before a group's first rebalance, and a group minimum session
# low enough for the relay's S (500 ms here; MSK's default is 6 s and cannot go below 1 s there).
# Few internal-topic partitions: their creation is most of a fresh cluster's first group join.
_COMMON_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "delete.topic.enable": "true",
    "log.segment.bytes": str(64 * 1024 * 1024),
    "log.retention.check.interval.ms": "60000",
    # A transaction whose producer died is aborted after its own transaction.timeout.ms;
    # the scan for such transactions runs every 10 s by default.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    # A killed node is fenced by the controller after broker.session.timeout.ms (9 s by
    # default), and only then do its partitions get new leaders.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
}

# Heap per node: the broker's working set here is a few hundred MB at most; the JVM's default
# (a quarter of RAM) only delays the first GC and costs start-up.
_JVM_OPTIONS = [
    "-Xms256m",
    "-Xmx768m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]

_LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: WARN
      - name: state.change.logger
        level: WARN
"""


def _free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def kafka_libs() -> Path:
    """The directory of Apache Kafka's jars: ``$PRICING_HA_KAFKA_LIBS`` or ``.jars/kafka/libs``.

    Raises:
        LocalKafkaError: there are no jars there (``scripts/jars`` has not run).
    """
    configured = os.environ.get(KAFKA_LIBS_ENV)
    libs = (
        Path(configured)
        if configured
        else Path(__file__).resolve().parents[2] / ".jars" / "kafka" / "libs"
    )
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise LocalKafkaError(
            f"no Apache Kafka jars in {libs}: run scripts/jars (or scripts/bootstrap), or set"
            f" {KAFKA_LIBS_ENV} to a directory holding kafka_2.13 and its dependencies"
        )
    return libs


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise LocalKafkaError("no java on PATH: Apache Kafka needs a Java runtime 17 or later")
    return found


@dataclass(frozen=True)
class _Ports:
    broker: int
    controller: int


class KafkaNode:
    """One broker+controller JVM of a :class:`LocalKafka` (its node id, rack and process)."""

    def __init__(self, cluster: LocalKafka, node_id: int, rack: str, ports: _Ports) -> None:
        self._cluster = cluster
        self.node_id = node_id
        self.rack = rack
        self.ports = ports
        self.dir = cluster.workdir / f"node-{node_id}"
        self.log_path = self.dir / "broker.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """This node's client listener, ``HOST:PORT``."""
        return f"{self._cluster.host}:{self.ports.broker}"

    @property
    def pid(self) -> int:
        """The node's process id; raises :class:`LocalKafkaError` if it is not running."""
        if self._proc is None:
            raise LocalKafkaError(f"kafka node {self.node_id} has not been started")
        return self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the node's process exists and has not exited (it may be paused)."""
        return self._proc is not None and self._proc.poll() is None

    def write_config(self) -> Path:
        """Write this node's ``server.properties`` and return its path."""
        c = self._cluster
        self.dir.mkdir(parents=True, exist_ok=True)
        n = len(c.nodes)
        replication = str(min(n, 3))
        min_isr = "2" if n >= 3 else "1"
        voters = ",".join(f"{m.node_id}@127.0.0.1:{m.ports.controller}" for m in c.nodes)
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "broker.rack": self.rack,
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://{c.host}:{self.ports.broker},"
                f"CONTROLLER://127.0.0.1:{self.ports.controller}"
            ),
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            "default.replication.factor": replication,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": min_isr,
            **_COMMON_SETTINGS,
            **c.overrides,
        }
        path = self.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        return path

    def format(self) -> None:
        """Format the node's log directory for the cluster id (once, before its first start)."""
        c = self._cluster
        config = self.write_config()
        argv = [_java(), "-cp", c.classpath, "kafka.tools.StorageTool", "format"]
        argv += [f"--cluster-id={c.cluster_id}", "-c", str(config), "--ignore-formatted"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise LocalKafkaError(
                f"formatting kafka node {self.node_id} failed ({done.returncode}):"
                f" {(done.stderr or done.stdout)[-_LOG_TAIL_BYTES:]}"
            )

    def start(self) -> None:
        """Spawn the node's JVM (its log directory must be formatted); returns at once."""
        if self.running:
            raise LocalKafkaError(f"kafka node {self.node_id} is already running")
        self._close_log()
        c = self._cluster
        self._log_file = self.log_path.open("ab")
        argv = [_java(), *_JVM_OPTIONS, f"-Dlog4j2.configurationFile={c.log4j_config}"]
        argv += [f"-Dkafka.logs.dir={self.dir}", "-cp", c.classpath, "kafka.Kafka"]
        argv.append(str(self.dir / "server.properties"))
        try:
            # A session of its own keeps a terminal's Ctrl-C (sent to the foreground process
            # group) from reaching the broker before we have stopped our clients.
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self._close_log()
            raise LocalKafkaError(f"cannot run java for kafka node {self.node_id}: {exc}") from exc

    def check_alive(self) -> None:
        """Raise :class:`LocalKafkaError` (with the log's tail) if the node has exited."""
        if self._proc is None:
            raise LocalKafkaError(f"kafka node {self.node_id} has not been started")
        code = self._proc.poll()
        if code is not None:
            raise self.error(f"exited with status {code}")

    def error(self, what: str) -> LocalKafkaError:
        """An error about this node, ending with the tail of its log."""
        tail = ""
        if self.log_path.exists():
            data = self.log_path.read_bytes()[-_LOG_TAIL_BYTES:]
            tail = data.decode("utf-8", "replace").strip()
        return LocalKafkaError(
            f"kafka node {self.node_id} on {self.bootstrap} {what}; log {self.log_path}:\n{tail}"
        )

    def pause(self) -> None:
        """Freeze the node with SIGSTOP (every thread stopped before this returns)."""
        freeze(self.pid)

    def resume(self) -> None:
        """Let a paused node continue with SIGCONT."""
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the node and reap it: a crash, its log directory left as it was."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._close_log()

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after ``timeout_s``; idempotent."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
                proc.send_signal(signal.SIGCONT)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


class LocalKafka:
    """Apache Kafka on ``127.0.0.1``: one node, or three in racks a/b/c; a context manager.

    Example::

        with LocalKafka() as kafka:
            producer = Producer({"bootstrap.servers": kafka.bootstrap})

    Args:
        nodes: 1 or 3 combined broker+controller processes.
        workdir: where each node keeps its configuration, log and data (``node-N/``);
            ``None`` creates a temporary directory, removed by :meth:`stop` unless
            ``keep_workdir``.
        keep_workdir: keep a temporary ``workdir`` after :meth:`stop` (to read the logs).
        overrides: extra ``server.properties`` settings for every node.
        startup_timeout_s: how long :meth:`start` waits for the cluster to answer.
        host: the address clients connect to (``127.0.0.1``; inside a network namespace, an
            address of that namespace). Controllers always listen on ``127.0.0.1``.
        port: the first node's client port (node N uses ``port + N - 1``); free ports if
            ``None``.
    """

    def __init__(
        self,
        *,
        nodes: int = 1,
        host: str = "127.0.0.1",
        port: int | None = None,
        workdir: Path | None = None,
        keep_workdir: bool = False,
        overrides: dict[str, str] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        if nodes not in (1, 3):
            raise LocalKafkaError(f"nodes must be 1 or 3, not {nodes}")
        self._temporary = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="pricing-ha-kafka-"))
        self._keep_workdir = keep_workdir
        self.overrides = dict(overrides or {})
        self._startup_timeout_s = startup_timeout_s
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.classpath = ""
        self.log4j_config = self.workdir / "log4j2.yaml"
        self.host = host
        used: set[int] = set() if port is None else set(range(port, port + nodes))
        self.nodes: list[KafkaNode] = []
        for i in range(nodes):
            client = _distinct_port(used) if port is None else port + i
            ports = _Ports(client, _distinct_port(used))
            self.nodes.append(KafkaNode(self, i + 1, _RACKS[i], ports))
        self._started = False
        self.startup_s: float | None = None
        """Seconds from spawning the nodes to the cluster's first complete answer."""

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value for clients: every node's listener."""
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def pid(self) -> int:
        """The first node's process id (the only one, for a single node)."""
        return self.nodes[0].pid

    @property
    def pids(self) -> list[int]:
        """Every running node's process id."""
        return [n.pid for n in self.nodes if n.running]

    @property
    def log_path(self) -> Path:
        """The first node's log file."""
        return self.nodes[0].log_path

    @property
    def running(self) -> bool:
        """Whether every node's process exists and has not exited (they may be paused)."""
        return self._started and all(n.running for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        """The node with this id (1-based, as in ``node.id``)."""
        return self.nodes[node_id - 1]

    def start(self) -> Self:
        """Format (first time only) and start every node; block until the cluster answers.

        Returns:
            This cluster, so ``kafka = LocalKafka().start()`` reads naturally.

        Raises:
            LocalKafkaError: jars or java are missing, a node exited, or the cluster did not
                answer within ``startup_timeout_s``; the message ends with a log's tail.
        """
        if self._started:
            raise LocalKafkaError("this local Kafka was already started")
        self.classpath = str(kafka_libs() / "*")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log4j_config.write_text(_LOG4J2, encoding="utf-8")
        began = time.monotonic()
        self._started = True
        atexit.register(self.stop)
        try:
            for n in self.nodes:
                n.format()
            for n in self.nodes:
                n.start()
            self.wait_ready(began + self._startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def restart_node(self, node_id: int, timeout_s: float = 60.0) -> None:
        """Start a stopped or killed node again, with its log; wait until it is back."""
        self.node(node_id).start()
        self.wait_ready(time.monotonic() + timeout_s)

    def wait_ready(self, deadline: float) -> None:
        """Poll until metadata names this cluster and every running node, or raise."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        expected = {n.node_id for n in self.nodes if n.running}
        admin: AdminClient | None = None
        while True:
            for n in self.nodes:
                if n.node_id in expected:
                    n.check_alive()
            if admin is None and any(_port_open(self.host, n.ports.broker) for n in self.nodes):
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            if admin is not None:
                # confluent-kafka's stubs infer cluster_id as None; it is a str.
                cluster_id: str | None = None
                brokers: set[int] = set()
                try:
                    meta = admin.list_topics(timeout=1.0)
                    cluster_id, brokers = meta.cluster_id, set(meta.brokers)
                except KafkaException:
                    pass
                if cluster_id == self.cluster_id and expected <= brokers:
                    return
            if time.monotonic() > deadline:
                first = next(n for n in self.nodes if n.node_id in expected)
                raise first.error("did not answer a complete metadata request in time")
            time.sleep(0.1)

    def check_alive(self) -> None:
        """Raise :class:`LocalKafkaError` if any node has exited."""
        for n in self.nodes:
            n.check_alive()

    def pause(self) -> None:
        """Freeze every node (SIGSTOP): connections stay open but nothing is answered."""
        for n in self.nodes:
            n.pause()

    def resume(self) -> None:
        """Let every paused node continue (SIGCONT)."""
        for n in self.nodes:
            n.resume()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every node (SIGTERM, then SIGKILL); idempotent, also run at interpreter exit.

        The nodes are told to stop all at once: a three-node cluster stopped one at a time
        spends each shutdown moving partition leadership to the nodes still running.
        """
        atexit.unregister(self.stop)
        for n in self.nodes:
            if n.running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n.pid, signal.SIGCONT)
                    os.kill(n.pid, signal.SIGTERM)
        for n in self.nodes:
            n.stop(timeout_s)
        if self._temporary and not self._keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _distinct_port(used: set[int]) -> int:
    while (port := _free_port()) in used:
        pass
    used.add(port)
    return port


def _port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), 0.2):
        return True
    return False


def run_foreground(
    nodes: int,
    workdir: Path | None,
    announce: Callable[[LocalKafka], object],
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
) -> None:
    """Run a local Kafka until SIGINT or SIGTERM arrives (the ``pricing-ha broker`` command).

    Args:
        nodes: 1 or 3.
        workdir: where the nodes keep their data; ``None`` for a temporary directory.
        host: the client listeners' address.
        port: the first node's client port, or ``None`` for free ports.
        announce: called once with the cluster when it is ready.

    Raises:
        LocalKafkaError: the cluster failed to start or a node died while running.
    """
    signals = {signal.SIGINT, signal.SIGTERM}
    kafka = LocalKafka(
        nodes=nodes, workdir=workdir, keep_workdir=workdir is not None, host=host, port=port
    )
    with kafka:
        announce(kafka)
        # Blocked only after the spawn: a child inherits the signal mask across exec.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        try:
            while signal.sigtimedwait(signals, 1.0) is None:
                kafka.check_alive()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
