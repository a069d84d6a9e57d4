"""A local Apache Kafka (KRaft mode) for the demo, the tests and the benchmarks.

:class:`LocalKafka` runs one or three combined broker+controller JVMs on ``127.0.0.1`` from the
jars that ``scripts/jars`` resolves (``.jars/kafka/libs``; ``PRICING_HA_KAFKA_LIBS`` points
elsewhere). Each node has its own log directory under the work directory, so a node that is
killed and started again comes back with its data, as a real broker does. The cluster is ready
once every node answers a metadata request naming this cluster's id and all of its brokers.

A three-node cluster may also be spread over hosts (network namespaces, for the AZ rehearsal of
``scripts/az-rehearsal``): ``hosts`` gives each node its own address, and ``node_id`` makes a
:class:`LocalKafka` run just that node, the other two being run by their own processes with the
same ``hosts``, ``port`` and ``cluster_id``.

Three nodes stand in racks ``a``, ``b`` and ``c`` with replication factor 3 and
``min.insync.replicas = 2`` for every topic (the internal ones included), so that one node, or the
AZ it stands in, can be lost without losing a write. Settings favour fast local fail-over; what
MSK uses instead is in docs/architecture.md (#7-the-local-apache-kafka).

The nodes are separate processes so that fault tests can pause (SIGSTOP), kill and restart them
and observe what real clients do.

``secured=True`` runs the cluster with SASL/SCRAM over TLS, the standard authorizer and the ACLs
of the role table (:mod:`pricing_ha.local.secured`); plain mode is the default.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import shutil
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from pricing_ha.config import AppConfig
from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.kafka_node import (
    KAFKA_LIBS_ENV,
    LOG4J2,
    RACKS,
    KafkaNode,
    Ports,
    free_port,
    kafka_libs,
)
from pricing_ha.local.secured import ADMIN, Secured

__all__ = ["KAFKA_LIBS_ENV", "KafkaNode", "LocalKafka", "kafka_libs", "run_foreground"]


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
            address of that namespace). Controllers listen on ``127.0.0.1``.
        port: the first node's client port (node N uses ``port + N - 1``); free ports if
            ``None``. With ``hosts``, every node's client port, and ``port + 1`` its
            controller's.
        hosts: one distinct address per node (instead of ``host``): node N's client and
            controller listeners bind to ``hosts[N-1]``, so the nodes may sit on different
            hosts or network namespaces. Needs ``port``.
        node_id: run only this node of the cluster (``hosts`` and ``cluster_id`` needed; the
            others are started elsewhere with the same ``nodes``, ``hosts``, ``port`` and
            ``cluster_id``); ``None`` runs every node.
        cluster_id: the KRaft cluster id every node is formatted with; random if ``None``.
        secured: SASL/SCRAM-SHA-512 over TLS, ``StandardAuthorizer``, one user per role of
            the default configuration's role table (``feed``, ``p1``, ``p2``, ``relay``...,
            and ``admin``) and their ACLs for the default names (:meth:`grant` adds those of
            another configuration's topic names; a publishing group not named p1 or p2 is a
            role with no user here).
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
        secured: bool = False,
        hosts: Sequence[str] | None = None,
        node_id: int | None = None,
        cluster_id: str | None = None,
    ) -> None:
        if nodes not in (1, 3):
            raise LocalKafkaError(f"nodes must be 1 or 3, not {nodes}")
        _check_spread(
            nodes, hosts=hosts, port=port, node_id=node_id, cluster_id=cluster_id, secured=secured
        )
        self._temporary = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="pricing-ha-kafka-"))
        self._keep_workdir = keep_workdir
        self.overrides = dict(overrides or {})
        self._startup_timeout_s = startup_timeout_s
        self.cluster_id = cluster_id or (
            base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        )
        self.classpath = ""
        self.log4j_config = self.workdir / "log4j2.yaml"
        self.host = host
        self._secure = secured
        #: The TLS material and SCRAM users of a secured cluster (made by :meth:`start`).
        self.secured: Secured | None = None
        used: set[int] = set() if port is None else set(range(port, port + nodes))
        self.nodes: list[KafkaNode] = []
        for i in range(nodes):
            if hosts is not None and port is not None:
                node = KafkaNode(
                    self, i + 1, RACKS[i], Ports(port, port + 1), host=hosts[i],
                    controller_host=hosts[i],
                )  # fmt: skip
            else:
                client = _distinct_port(used) if port is None else port + i
                ports = Ports(client, _distinct_port(used))
                node = KafkaNode(self, i + 1, RACKS[i], ports, host=host)
            self.nodes.append(node)
        #: The nodes this object runs: all of them, or node ``node_id`` alone.
        self.local_nodes = [n for n in self.nodes if node_id in (None, n.node_id)]
        self._started = False
        self.startup_s: float | None = None
        """Seconds from spawning the nodes to the cluster's first complete answer."""

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value for clients: every node's listener."""
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def pid(self) -> int:
        """The first local node's process id (the only one, for a single node)."""
        return self.local_nodes[0].pid

    @property
    def pids(self) -> list[int]:
        """Every running local node's process id."""
        return [n.pid for n in self.local_nodes if n.running]

    @property
    def running(self) -> bool:
        """Whether every local node's process exists and has not exited (it may be paused)."""
        return self._started and all(n.running for n in self.local_nodes)

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
        self.log4j_config.write_text(LOG4J2, encoding="utf-8")
        if self._secure:
            self.secured = Secured.create(self.workdir, self.host)
        began = time.monotonic()
        self._started = True
        atexit.register(self.stop)
        try:
            for n in self.local_nodes:
                n.format()
            for n in self.local_nodes:
                n.start()
            self.wait_ready(began + self._startup_timeout_s)
            if self.secured is not None:
                self.grant(AppConfig())
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
        """Poll until metadata names this cluster and every running local node, or raise.

        A node run alone (``node_id``) answers once a quorum of the controllers has formed.
        """
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        local = [n for n in self.local_nodes if n.running]
        expected = {n.node_id for n in local}
        admin: AdminClient | None = None
        while True:
            for n in local:
                n.check_alive()
            if admin is None and any(_port_open(n.host, n.ports.broker) for n in local):
                settings = self.client_settings(ADMIN)
                settings["bootstrap.servers"] = ",".join(n.bootstrap for n in local)
                admin = AdminClient({**settings, "log_level": 0})
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
                raise local[0].error("did not answer a complete metadata request in time")
            time.sleep(0.1)

    def client_settings(self, user: str = ADMIN) -> dict[str, Any]:
        """librdkafka settings of a client of this cluster: ``bootstrap.servers``, and on a
        secured cluster TLS and SCRAM as ``user`` (a role of the table, or ``admin``)."""
        settings: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        if self.secured is not None:
            settings.update(self.secured.client_settings(user))
        return settings

    def grant(self, cfg: AppConfig) -> int:
        """Create every role's ACLs for ``cfg``'s topic and group names (as ``admin``).

        Returns:
            How many bindings were created; 0 on a plain cluster (which has no authorizer).
        """
        if self.secured is None:
            return 0
        from confluent_kafka.admin import AdminClient

        from pricing_ha.security import create_acls

        return create_acls(AdminClient({**self.client_settings(ADMIN), "log_level": 0}), cfg)

    def check_alive(self) -> None:
        """Raise :class:`LocalKafkaError` if any local node has exited."""
        for n in self.local_nodes:
            n.check_alive()

    def pause(self) -> None:
        """Freeze every local node (SIGSTOP): connections stay open but nothing is answered."""
        for n in self.local_nodes:
            n.pause()

    def resume(self) -> None:
        """Let every paused local node continue (SIGCONT)."""
        for n in self.local_nodes:
            n.resume()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every node (SIGTERM, then SIGKILL); idempotent, also run at interpreter exit.

        The nodes are told to stop all at once: a three-node cluster stopped one at a time
        spends each shutdown moving partition leadership to the nodes still running.
        """
        atexit.unregister(self.stop)
        for n in self.local_nodes:
            n.terminate()
        for n in self.local_nodes:
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


def _check_spread(
    nodes: int,
    *,
    hosts: Sequence[str] | None,
    port: int | None,
    node_id: int | None,
    cluster_id: str | None,
    secured: bool,
) -> None:
    """Refuse ``hosts``/``node_id`` combinations whose nodes could not find each other."""
    if hosts is not None:
        if len(hosts) != nodes:
            raise LocalKafkaError(f"hosts: one address per node ({nodes}), not {len(hosts)}")
        if len(set(hosts)) != nodes:
            raise LocalKafkaError(f"hosts must be distinct addresses, not {list(hosts)}")
        if port is None:
            raise LocalKafkaError("hosts needs a port (the same on every host)")
    if node_id is None:
        return
    if hosts is None:
        raise LocalKafkaError("node_id needs hosts: the other nodes must reach its controller")
    if cluster_id is None:
        raise LocalKafkaError("node_id needs the cluster_id that every node is formatted with")
    if not 1 <= node_id <= nodes:
        raise LocalKafkaError(f"node_id must be 1..{nodes}, not {node_id}")
    if secured:
        raise LocalKafkaError("secured is not supported with node_id (one CA per cluster)")


def _distinct_port(used: set[int]) -> int:
    while (port := free_port()) in used:
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
    secured: bool = False,
    hosts: Sequence[str] | None = None,
    node_id: int | None = None,
    cluster_id: str | None = None,
    startup_timeout_s: float = 60.0,
) -> None:
    """Run a local Kafka until SIGINT or SIGTERM arrives (the ``pricing-ha broker`` command).

    Args:
        nodes: 1 or 3.
        workdir: where the nodes keep their data; ``None`` for a temporary directory.
        host: the client listeners' address.
        port: the first node's client port, or ``None`` for free ports.
        secured: SASL/SCRAM over TLS with the role table's ACLs (see :class:`LocalKafka`).
        hosts: each node's address; node_id: run only that node; cluster_id: the cluster's
            id (see :class:`LocalKafka`).
        startup_timeout_s: how long to wait for the cluster to answer.
        announce: called once with the cluster when it is ready.

    Raises:
        LocalKafkaError: the cluster failed to start or a node died while running.
    """
    signals = {signal.SIGINT, signal.SIGTERM}
    kafka = LocalKafka(
        nodes=nodes,
        workdir=workdir,
        keep_workdir=workdir is not None,
        host=host,
        port=port,
        secured=secured,
        hosts=hosts,
        node_id=node_id,
        cluster_id=cluster_id,
        startup_timeout_s=startup_timeout_s,
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
