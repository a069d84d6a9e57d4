"""A synthetic run's span files, written as the processes write them (for the trace tests).

neli's leadership tracing on fake members, through the application's telemetry set-up, one
JSON-lines file per "process": P1/a dies leading p0 and p1, P1/b takes over, p2 is handed from
b to c, and the relay sees one publisher switch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

from neli import Neli
from neli.testing import FakeNeli
from pricing_ha.config import AppConfig, TelemetryConfig
from pricing_ha.dedupe.arbitration import Emission
from pricing_ha.dedupe.failover_spans import trace_switch
from pricing_ha.telemetry import Telemetry, setup_telemetry

T0 = 1_700_000_000.0  # FakeNeli's wall clock starts here
P1 = "pricing.p1"


class Member:
    """A fake NELI member traced to its own span file, as one process would be."""

    def __init__(self, directory: Path, group: str, name: str, partitions: int = 3) -> None:
        self.neli = FakeNeli(partitions=partitions, group_id=group, member_name=name)
        self.telemetry: Telemetry = setup_telemetry(
            AppConfig(telemetry=TelemetryConfig(az="az-x")),
            service_role="probe",
            group=group,
            member=name,
            trace_file=directory / f"{name.replace('/', '-')}.jsonl",
            env={},
        )
        # The fake stands in for Neli.
        self.tracing = self.telemetry.observe_neli(cast(Neli, self.neli))

    def at(self, seconds: float) -> None:
        """Move this member's clock to T0 + seconds."""
        clock = self.neli._clock  # the fake's own clock: events are stamped with it
        clock.advance(T0 + seconds - clock.wall())

    def alive_at(self, seconds: float) -> None:
        """Export one unrelated span at T0 + seconds (its last sign of life)."""
        ns = int((T0 + seconds) * 1e9)
        self.telemetry.tracer().start_span("heartbeat", start_time=ns).end(end_time=ns)


def write_run(directory: Path) -> Path:
    """Write the run's span files into ``directory`` (see the module docstring); returns it."""

    async def act() -> None:
        a, b, c = (Member(directory, P1, f"p1/{n}") for n in "abc")
        relay = Member(directory, "pricing.relay", "relay/r1")
        for m in (a, b, c, relay):
            m.at(0.0)
        await a.neli.acquire(0, 1)
        b.at(0.5)
        await b.neli.acquire(2)
        relay.at(0.2)
        await relay.neli.acquire(0, 1, 2)
        a.alive_at(4.8)
        a_meta = a.neli.heartbeat_meta()  # its last heartbeat, then SIGKILL: no more spans
        a.telemetry.shutdown()
        b.at(8.0)
        await b.neli.acquire(0, 1, predecessor=a_meta)
        trace_switch(
            relay.telemetry.tracer(),
            Emission("EURUSD", 42, None, "p2/a", 0, "p1/a", 0.35, 7),
            stage="relay",
            partition=1,
            observer="r1",
            at_ns=int((T0 + 8.1) * 1e9),
        )
        b_meta = b.neli.heartbeat_meta()
        b.at(9.0)
        await b.neli.revoke(2, reason="rebalance")
        c.at(9.2)
        await c.neli.acquire(2, predecessor=b_meta)
        for m in (b, c, relay):
            m.telemetry.shutdown()

    asyncio.run(act())
    return directory
