"""Shared helpers for the benchmarks: machine description, JSON output, waiting, topic tails."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from pricing_ha.kafka.headers import is_control

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """A description of the machine the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_gb, 1),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def summary(values: list[float]) -> dict[str, float]:
    """min / median / max / mean of ``values``."""
    return {
        "n": len(values),
        "min": round(min(values), 4),
        "median": round(statistics.median(values), 4),
        "max": round(max(values), 4),
        "mean": round(statistics.fmean(values), 4),
    }


def write(
    name: str,
    figures: dict[str, Any],
    path: Path | None = None,
    *,
    smoke: str | None = None,
    head: dict[str, Any] | None = None,
) -> Path:
    """Write ``figures`` (plus the machine) to bench/results/NAME.json and print them.

    ``path``, when given, is written instead of bench/results/NAME.json. ``smoke`` (why the
    run is too small to report) sends it to a temporary NAME.smoke.json instead, and says so.
    ``head``: top-level entries placed before the machine and the figures (a verdict a reader
    should see first, such as a benchmark's goals).
    """
    doc = {"benchmark": name, **(head or {}), "machine": machine(), "figures": figures}
    if smoke is not None:
        path = Path(tempfile.gettempdir()) / f"{name}.smoke.json"
    path = path if path is not None else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    print(f"written to {path}")
    if smoke is not None:
        print(f"smoke run ({smoke}): nothing written to bench/results")
    return path


def wait_until(cond: Callable[[], bool], timeout_s: float, poll_s: float = 0.1) -> bool:
    """Poll ``cond`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(poll_s)
    return bool(cond())


def consumer(bootstrap: str, group: str | None = None) -> Consumer:
    """A consumer that commits nothing (of a throwaway group unless ``group`` is given) and
    reads ``read_committed``, as subscribers do (librdkafka's default, stated: what a reader
    of ``prices`` sees is what the benchmarks judge)."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "isolation.level": "read_committed",
            "group.id": group or f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            "log.connection.close": False,
        }
    )


def _is_data(msg: Message) -> bool:
    """A record without error that is not a control record (a relay's takeover marker)."""
    return msg.error() is None and not is_control(msg.key(), msg.headers())


class TopicTail:
    """Follows topics in a daemon thread, handing each fetch to ``on_batch(records, received)``.

    Every partition of ``topics`` is read from ``start`` (the beginning by default). A fetch
    waits up to 0.1 s for one record, then takes whatever else has already arrived, so records
    are handed over soon after they land; ``received`` is the monotonic time just after the
    fetch. Records with an error, and control records, are left out; ``on_batch`` runs in the
    tail's thread. Control records go to ``on_control(records)``, if given (same thread).
    """

    def __init__(
        self,
        bootstrap: str,
        topics: Iterable[str],
        partitions: int,
        on_batch: Callable[[list[Message], float], None],
        *,
        start: int = OFFSET_BEGINNING,
        name: str = "bench-tail",
        on_control: Callable[[list[Message]], None] | None = None,
    ) -> None:
        """Start following."""
        self._on_batch = on_batch
        self._on_control = on_control
        self._stop = threading.Event()
        self._consumer = consumer(bootstrap)
        self._consumer.assign(
            [TopicPartition(t, p, start) for t in topics for p in range(partitions)]
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self._consumer.consume(1, 0.1)
                if batch:
                    batch += self._consumer.consume(9999, 0)
                    received = time.monotonic()
                    self._on_batch([m for m in batch if _is_data(m)], received)
                    if self._on_control is not None:
                        control = [m for m in batch if m.error() is None and not _is_data(m)]
                        if control:
                            self._on_control(control)
        finally:
            self._consumer.close()

    def close(self) -> None:
        """Stop following."""
        self._stop.set()
        self._thread.join(10)
