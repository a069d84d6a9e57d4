"""Fixtures of the integration tests: processes, pricing clusters, NELI clusters, the demo.

Every process a test starts belongs to its ``procs`` group and is stopped (by PID) when the test
ends, pass or fail. ``cluster`` is a pricing deployment on fresh topics of the session broker;
a module that needs its processes configured differently overrides ``cluster_env``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.broker_faults import offsets_leaders, offsets_partition
from pricing_ha.local.cluster import PricingCluster, pricing_cli
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.publishing.publisher import neli_group_id
from tests.conftest import BOOTSTRAP_ENV, TopicFactory
from tests.integration.neli_harness import Cluster


@pytest.fixture
def procs(tmp_path: Path, bootstrap: str, topic_factory: TopicFactory) -> Iterator[ProcessGroup]:
    """The test's processes (logs under tmp_path/logs), stopped by PID at the end.

    Depends on ``bootstrap`` so that the broker is torn down after the processes: members
    stopping against a broker already gone wait out every timeout (15-20 s per test). And on
    ``topic_factory`` so that the test's topics are deleted after the processes have stopped:
    librdkafka has been seen to crash (SIGSEGV) when a topic it had partitions of assigned was
    deleted (docs/architecture.md, the local Apache Kafka), which would take members down before
    they are asked to stop.
    """
    del bootstrap, topic_factory
    group = ProcessGroup(tmp_path / "logs")
    try:
        yield group
    finally:
        # SIGTERM, then SIGKILL after 1 s: the test is over and nothing reads what a process
        # does on its way out (the tests of graceful stops stop their processes themselves).
        # A relay with no successor to ask for its partitions would otherwise hand them over
        # for its full 10 s bound; waiting 4 s for it cost 90 s of every CI run.
        group.close(grace_s=1.0)
    assert_none_crashed(group)


def assert_none_crashed(group: ProcessGroup) -> None:
    """Fail if a process of ``group`` crashed (as opposed to one stopped, or killed by the
    test), even if the test's assertions passed: nothing else would notice."""
    crashed = [
        f"{p.name} (pid {p.pid}): {signal.Signals(-code).name}"
        for p in group.procs
        if (code := p.popen.returncode) is not None and -code in _CRASH_SIGNALS
    ]
    assert not crashed, f"processes crashed: {crashed}"


_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}


@pytest.fixture
def cluster_env() -> dict[str, str]:
    """Extra environment of every process ``cluster`` starts (none unless a module overrides)."""
    return {}


@pytest.fixture
def cluster(
    procs: ProcessGroup, bootstrap: str, tmp_path: Path, cluster_env: dict[str, str]
) -> PricingCluster:
    """A pricing configuration on fresh topics; every process is stopped at the end."""
    c = PricingCluster(procs, bootstrap, tmp_path)
    c.env.update(cluster_env)
    c.create_topics()
    return c


@pytest.fixture
def kafka3_overrides() -> dict[str, str]:
    """Extra ``server.properties`` of ``kafka3``'s nodes (a test parametrizes it to change)."""
    return {}


@pytest.fixture
def kafka3(tmp_path: Path, kafka3_overrides: dict[str, str]) -> Iterator[LocalKafka]:
    """A three-node Apache Kafka (racks a/b/c, RF 3, min ISR 2) owned by one test, on free
    ports; every node is stopped by PID at the end, pass or fail."""
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"needs brokers it can kill; {BOOTSTRAP_ENV} points elsewhere")
    with LocalKafka(
        nodes=3, workdir=tmp_path / "kafka3", overrides=kafka3_overrides, startup_timeout_s=120
    ) as kafka:
        yield kafka


@pytest.fixture
def cluster3_uid(request: pytest.FixtureRequest, kafka3: LocalKafka) -> str:
    """The uid of ``cluster3``'s topic and group names: random, or (``indirect`` parameter
    ``"shared-coordinator"``) one whose p1 and p2 NELI groups have the same coordinator."""
    if getattr(request, "param", None) != "shared-coordinator":
        return uuid.uuid4().hex[:8]
    admin = AdminClient(kafka3.client_settings())
    leaders = offsets_leaders(admin)
    for _ in range(100_000):
        uid = uuid.uuid4().hex[:8]
        nodes = {
            leaders[offsets_partition(neli_group_id(f"{p}-{uid}"), len(leaders))]
            for p in ("p1", "p2")
        }
        if len(nodes) == 1:
            return uid
    raise AssertionError(f"no uid puts both NELI groups on one coordinator: {leaders}")


@pytest.fixture
def cluster3(kafka3: LocalKafka, tmp_path: Path, cluster3_uid: str) -> Iterator[PricingCluster]:
    """A pricing configuration on ``kafka3`` with every topic at replication factor 3; its
    processes are stopped by PID before the brokers, and a crashed one fails the test."""
    group = ProcessGroup(tmp_path / "logs3")
    try:
        c = PricingCluster(
            group, kafka3.bootstrap, tmp_path, replication_factor=3, uid=cluster3_uid
        )
        c.create_topics()
        yield c
    finally:
        group.close(grace_s=1.0)
    assert_none_crashed(group)


@pytest.fixture
def neli_cluster(procs: ProcessGroup, bootstrap: str, tmp_path: Path) -> Callable[..., Cluster]:
    """Makes NELI clusters (probe members) on a given topic, of the session broker by default."""

    def make(topic: str, bootstrap_servers: str = bootstrap) -> Cluster:
        return Cluster(procs, bootstrap_servers, topic, tmp_path)

    return make


@pytest.fixture
def run_demo(bootstrap: str, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs ``pricing-ha demo --no-live ARGS`` on the session broker, working in tmp_path/demo."""

    def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                *pricing_cli(),
                "demo",
                f"--bootstrap={bootstrap}",
                *args,
                "--no-live",
                f"--workdir={tmp_path / 'demo'}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run
