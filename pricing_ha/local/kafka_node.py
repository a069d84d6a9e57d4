"""One node of the local Apache Kafka: its configuration, its JVM, and the jars it runs from.

A :class:`KafkaNode` is a combined broker+controller (KRaft) process of a
:class:`~pricing_ha.local.broker.LocalKafka`: it writes its ``server.properties``, formats its
log directory once, and starts, pauses, kills or stops its JVM. The settings every node gets
(fast local fail-over) and the JVM's options are here too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.procs import freeze
from pricing_ha.local.secured import Secured

__all__ = [
    "KAFKA_LIBS_ENV",
    "LOG4J2",
    "RACKS",
    "Cluster",
    "KafkaNode",
    "Ports",
    "free_port",
    "kafka_libs",
]

KAFKA_LIBS_ENV = "PRICING_HA_KAFKA_LIBS"
_LOG_TAIL_BYTES = 4000
RACKS = ("a", "b", "c")

# Fast local fail-over: no delay before a group's first rebalance, and a group minimum session
# low enough for the relay's S (500 ms here; Apache Kafka's and MSK's default is 6 s).
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

# monitorInterval: the file is read again within a second of a change, which lets a benchmark
# switch the request log on while the broker runs (bench.broker.requests).
LOG4J2 = """\
Configuration:
  status: warn
  monitorInterval: 1
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


def free_port() -> int:
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
class Ports:
    broker: int
    controller: int


class Cluster(Protocol):
    """What a node reads of its cluster (:class:`~pricing_ha.local.broker.LocalKafka`)."""

    host: str
    workdir: Path
    overrides: dict[str, str]
    cluster_id: str
    classpath: str
    log4j_config: Path
    nodes: list[KafkaNode]
    secured: Secured | None


class KafkaNode:
    """One broker+controller JVM of a local cluster (its node id, rack, addresses and process).

    ``host`` is the address of the node's client listener; ``controller_host`` that of its
    controller listener, which the other nodes' controllers reach too (``127.0.0.1`` when the
    whole cluster runs on one host).
    """

    def __init__(
        self,
        cluster: Cluster,
        node_id: int,
        rack: str,
        ports: Ports,
        *,
        host: str,
        controller_host: str = "127.0.0.1",
    ) -> None:
        self._cluster = cluster
        self.node_id = node_id
        self.rack = rack
        self.ports = ports
        self.host = host
        self.controller_host = controller_host
        self.dir = cluster.workdir / f"node-{node_id}"
        self.log_path = self.dir / "broker.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """This node's client listener, ``HOST:PORT``."""
        return f"{self.host}:{self.ports.broker}"

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
        voters = ",".join(f"{m.node_id}@{m.controller_host}:{m.ports.controller}" for m in c.nodes)
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "broker.rack": self.rack,
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://{self.host}:{self.ports.broker},"
                f"CONTROLLER://{self.controller_host}:{self.ports.controller}"
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
        }
        if c.secured is not None:
            settings.update(
                c.secured.server_settings(self.host, self.ports.broker, self.ports.controller)
            )
        settings.update(c.overrides)
        path = self.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        if c.secured is not None:
            path.chmod(0o600)  # it holds the broker's own SCRAM password
        return path

    def format(self) -> None:
        """Format the node's log directory for the cluster id (once, before its first start)."""
        c = self._cluster
        config = self.write_config()
        argv = [_java(), "-cp", c.classpath, "kafka.tools.StorageTool", "format"]
        argv += [f"--cluster-id={c.cluster_id}", "-c", str(config), "--ignore-formatted"]
        if c.secured is not None:
            argv += c.secured.scram_format_args()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            output = (done.stderr or done.stdout)[-_LOG_TAIL_BYTES:]
            if c.secured is not None:  # the tool may echo its arguments, passwords included
                for password in c.secured.passwords.values():
                    output = output.replace(password, "***")
            raise LocalKafkaError(
                f"formatting kafka node {self.node_id} failed ({done.returncode}): {output}"
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

    def terminate(self) -> None:
        """Ask the node to shut down (SIGTERM; SIGCONT in case it is paused); returns at once."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
                proc.send_signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after ``timeout_s``; idempotent."""
        self.terminate()
        proc = self._proc
        if proc is not None and proc.poll() is None:
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
