"""Fixtures of the integration tests: processes, pricing clusters, NELI clusters, the demo.

Every process a test starts belongs to its ``procs`` group and is stopped (by PID) when the test
ends, pass or fail. ``cluster`` is a pricing deployment on fresh topics of the session broker;
a module that needs its processes configured differently overrides ``cluster_env``.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pricing_ha.local.cluster import PricingCluster, pricing_cli
from pricing_ha.local.procs import ProcessGroup
from tests.conftest import TopicFactory
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
    # A process that crashed (as opposed to one stopped, or killed by the test) fails the test,
    # even if its assertions passed: nothing else would notice.
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
