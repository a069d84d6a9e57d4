"""GlobalTimer: a periodic job that runs once per period across N processes (exclusive NELI).

Backend.AI's managers needed each periodic job to run on exactly one manager, cluster-wide.
With NELI every process is a member of one group; the job is a *role*, led by the leader of
its partition, in exclusive mode (at most one leader at any instant). :class:`neli.LeaderTasks`
runs the timer loop while the partition is led and cancels it (waiting for it) when leadership
is lost. At each period boundary ``k·P`` (wall clock) the loop asks :meth:`neli.Neli.is_leader`
right before running period ``k``.

Why a period is never run twice: leadership intervals of different members do not overlap
(exclusive mode), each member runs a period at most once, and the number of the last period
run travels in the leader's heartbeats: a successor reads it from its predecessor's heartbeat
(``LeadershipEvent.predecessor``) and never runs that period or an earlier one.
Why at most one period is skipped per fault: when the leader dies, the next member leads after
about S + rebalance + T (T: the grace period); with a period longer than that, at most one
boundary falls into the gap.
What NELI cannot promise: if the leader is paused *while the job runs* and a successor takes
over, the old run finishes late, overlapping the successor's next run. Only fencing at the
resource the job writes to closes that window (see ``neli``'s "When leadership ends"); keep the
job short compared with S.

Run ``python -m examples.global_timer --bootstrap=... --topic=... --group=... --name=...
--log=FILE`` in several processes; each run appends one JSON line to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from neli import EventKind, LeadershipEvent, LeaderTasks, Mode, Neli, NeliConfig, Variant

Job = Callable[[int], Awaitable[None]]


class GlobalTimer:
    """Runs ``job(k)`` for every period ``k`` while this member leads ``role``.

    Args:
        neli: an exclusive-mode member (started or not).
        role: the job's name; its partition's leader runs it.
        period_s: P, the period (should exceed S + T plus a rebalance, see the docstring).
        job: the coroutine run once per period, given the period number ``k`` (``k·P`` is its
            start on the wall clock).
        wall: the wall clock (injectable for tests).
    """

    def __init__(
        self,
        neli: Neli,
        role: str,
        period_s: float,
        job: Job,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """Attach to ``neli``: register the predecessor hook, then the leader task."""
        if neli.config.mode is not Mode.EXCLUSIVE:
            raise ValueError("GlobalTimer needs an exclusive-mode member")
        self._neli = neli
        self._role = role
        self._period = period_s
        self._job = job
        self._wall = wall
        self._key = f"global_timer:{role}"
        #: The last period run by this member or, as far as it knows, by its predecessors.
        self.last_period = -1
        neli.add_heartbeat_meta(lambda: {self._key: self.last_period})
        neli.add_barrier(self._on_event)  # before LeaderTasks: runs first on ACQUIRED
        self._tasks = LeaderTasks(neli, self._lead)

    async def _on_event(self, event: LeadershipEvent) -> None:
        if event.kind is EventKind.ACQUIRED and event.predecessor is not None:
            done = event.predecessor.get(self._key)
            if done is not None:
                self.last_period = max(self.last_period, int(done))

    async def _lead(self, partition: int) -> None:
        if partition != self._neli.partition_for(self._role):
            return
        while True:
            k = math.floor(self._wall() / self._period) + 1
            await asyncio.sleep(max(0.0, k * self._period - self._wall()))
            if k <= self.last_period or not self._neli.is_leader(self._role):
                continue
            self.last_period = k
            await self._job(k)

    async def close(self) -> None:
        """Stop the timer (the member itself is closed by its owner)."""
        await self._tasks.close()


def _append(log: Path, record: dict[str, Any]) -> None:
    with log.open("a") as f:  # one short append per run: lines do not interleave
        f.write(json.dumps(record) + "\n")


async def _main(args: argparse.Namespace) -> None:
    log = Path(args.log)
    config = NeliConfig(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        topic=args.topic,
        member_name=args.name,
        variant=Variant.FAST,
        mode=Mode.EXCLUSIVE,
        session_timeout_ms=args.session_ms,
    )
    neli = Neli(config)

    async def job(k: int) -> None:
        start = time.time()
        await asyncio.sleep(args.job_s)  # the work
        record: dict[str, Any] = {"k": k, "name": args.name, "start": start, "end": time.time()}
        _append(log, record)

    timer = GlobalTimer(neli, args.role, args.period_s, job)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with neli:
        await stop.wait()
        await timer.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--role", default="nightly-report")
    parser.add_argument("--period-s", type=float, default=10.0)
    parser.add_argument("--job-s", type=float, default=0.2)
    parser.add_argument("--session-ms", type=int, default=3000)
    asyncio.run(_main(parser.parse_args()))
