"""The Go subscriber example (``examples/go-subscriber``) on the real broker, across a relay
fail-over: built with the Go toolchain, it reads ``prices`` as docs/asyncapi.json says and
must see every (instrument, seq) the feed produced exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.waiting import wait_for
from tests.integration.feed_end import end_feed_once_flowing
from tests.integration.relay.test_relay import _wait_exactly_once

GO_DIR = Path(__file__).resolve().parents[3] / "examples" / "go-subscriber"
# The first build downloads franz-go into the module cache (the Go module proxy).
BUILD_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def go_subscriber(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example, vetted, its own test run (main_test.go: the seq rule) and built into a
    temporary directory (go.mod and go.sum as committed: nothing is resolved anew)."""
    go = shutil.which("go")
    if go is None:
        pytest.fail(
            "`go` is not on PATH: the Go toolchain (1.26+) is part of this machine and this "
            "test builds examples/go-subscriber with it (scripts/bootstrap checks for it too)"
        )
    out = tmp_path_factory.mktemp("go") / "go-subscriber"
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
    for step in (["vet", "."], ["test", "."], ["build", "-o", str(out), "."]):
        done = subprocess.run(
            [go, *step],
            cwd=GO_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 0, f"go {step[0]} failed:\n{done.stdout}\n{done.stderr}"
    return out


def _summary(log: str) -> dict[str, Any]:
    """The JSON line the example prints at exit."""
    lines = [line for line in log.splitlines() if line.startswith("{")]
    assert lines, f"no summary line in the subscriber's output:\n{log[-2000:]}"
    return dict(json.loads(lines[-1]))


def test_go_subscriber_sees_every_price_once_across_a_relay_failover(
    cluster: PricingCluster, go_subscriber: Path
) -> None:
    """SIGKILL of a relay owner while the Go example reads prices: it skips the control
    records and sees each seq the feed produced exactly once, no gap, no duplicate."""
    cluster.publisher("p1", "a")
    cluster.publisher("p2", "a")
    r1 = cluster.relay("r1")
    cluster.relay("r2")
    cluster.wait_led(["p1", "p2", "relay"])
    sub = cluster.procs.spawn(
        "go-subscriber",
        [
            str(go_subscriber),
            f"-bootstrap={cluster.bootstrap}",
            f"-topic={cluster.topics['prices']}",
            "-from-beginning",
            "-idle=60s",
        ],
    )
    cluster.feed(instruments=12, rate=10, duration=60)

    def both_relays_emit() -> bool:
        relays = {r.headers.get("relay") for r in cluster.read("prices", 0.3, live=True)}
        return {"r1", "r2"} <= relays

    wait_for(both_relays_emit, 30, "prices from both relays")
    r1.kill()
    end_feed_once_flowing(cluster, "prices", time.time() * 1000 + 1000, timeout_s=60)
    _wait_exactly_once(cluster)  # what a Python reader sees, read_committed
    sub.terminate()
    assert sub.wait(15) == 0, sub.log_tail()
    got = _summary(sub.log_path.read_text())
    expected = cluster.expected()
    seen = {
        name: (i["count"], i["first_seq"], i["last_seq"], i["gaps"], i["duplicates"])
        for name, i in got["instruments"].items()
    }
    assert seen == {name: (last, 1, last, 0, 0) for name, last in expected.items()}, got
    assert (got["gaps"], got["duplicates"], got["invalid"]) == (0, 0, 0), got
    assert got["controls"] > 0, "the takeover's control records were never seen (or not skipped)"
    assert all(i["max_staleness_ms"] > 0 for i in got["instruments"].values()), got
    print(f"go subscriber: {got['prices']} prices, {got['controls']} control records skipped")
