"""A NELI member that records what it believes, for the demo, the tests and the benchmarks.

``python -m pricing_ha.local.probe --bootstrap ... --topic ... --group ... --out FILE`` joins a NELI
group and samples :meth:`neli.Neli.led_partitions` every ``--sample-ms`` on its event loop (as
an application would ask before acting), appending JSON lines to ``FILE``:

* ``{"k": "start", "t": mono, "pid": ..., "member_id": ...}``
* ``{"k": "led", "t": mono, "prev": mono_of_previous_sample, "led": [...]}`` on every change
* ``{"k": "gap", "t": last_sample, "until": mono}`` when sampling stopped for more than 250 ms
  (paused). Shorter delays (a busy machine) do not end a run: that can only make the runs
  longer, which makes overlap checks stricter, never laxer.
* ``{"k": "alive", "t": mono}`` every ``--alive-ms``
* ``{"k": "event", "t": mono, "kind": ..., "p": ..., "reason": ...}`` for leadership events
* ``{"k": "end", "t": mono}`` at a clean exit

Times are ``time.monotonic()``, which on Linux is one system-wide clock, so the records of all
processes on one machine can be compared instant by instant.

With ``--trace-file PATH`` the member also traces its leadership (:func:`neli.trace_leadership`
through :func:`pricing_ha.telemetry.setup_telemetry`) to that JSON-lines span file, and its
heartbeats carry its terms' trace contexts, so a successor's spans link to its terms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

from neli import Mode, Neli, NeliConfig, Variant

if TYPE_CHECKING:
    from pricing_ha.telemetry import Telemetry

_GAP_S = 0.25  # a loaded 2-core machine can delay the loop this long; longer is a pause


class _Recorder:
    def __init__(self, out: IO[bytes]) -> None:
        self._out = out

    def write(self, record: dict[str, Any]) -> None:
        self._out.write(orjson.dumps(record) + b"\n")
        self._out.flush()


async def _sample(neli: Neli, rec: _Recorder, sample_s: float, alive_s: float) -> None:
    prev_t = time.monotonic()
    prev_led: list[int] | None = None
    next_alive = prev_t
    while True:
        t = time.monotonic()
        led = sorted(neli.led_partitions())
        if t - prev_t > _GAP_S:
            rec.write({"k": "gap", "t": prev_t, "until": t})
            prev_led = None  # the reader ends every run at a gap; restate what we lead now
        if led != prev_led:
            rec.write({"k": "led", "t": t, "prev": prev_t, "led": led})
            prev_led = led
        if t >= next_alive:
            rec.write({"k": "alive", "t": t})
            next_alive = t + alive_s
        prev_t = t
        await asyncio.sleep(sample_s)


async def _events(neli: Neli, rec: _Recorder) -> None:
    async for ev in neli.events():
        rec.write(
            {
                "k": "event",
                "t": ev.at_mono,
                "kind": ev.kind.value,
                "p": ev.partition,
                "reason": ev.reason,
                "pred": (ev.predecessor or {}).get("member_name"),
            }
        )


def _telemetry(args: argparse.Namespace) -> Telemetry | None:
    if not args.trace_file:
        return None
    # Imported only when tracing: the OpenTelemetry SDK stays off the plain probe's start-up.
    from pricing_ha.config import AppConfig, TelemetryConfig
    from pricing_ha.telemetry import setup_telemetry

    return setup_telemetry(
        AppConfig(telemetry=TelemetryConfig(az=args.az)),
        service_role="probe",
        group=args.group,
        member=args.name,
        trace_file=Path(args.trace_file),
    )


def neli_config(args: argparse.Namespace) -> NeliConfig:
    """The member's configuration from its command line (also the election benchmark's)."""
    return NeliConfig(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        topic=args.topic,
        variant=Variant(args.variant),
        mode=Mode(args.mode),
        session_timeout_ms=args.session_ms,
        threshold_ms=args.threshold_ms,
        pulse_interval_ms=args.pulse_ms,
        member_name=args.name,
    )


async def run(args: argparse.Namespace) -> None:
    """Join the group and record until SIGTERM/SIGINT."""
    config = neli_config(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Small synchronous appends, flushed per record, so that a SIGKILL loses nothing.
    with Path(args.out).open("ab") as out:  # noqa: ASYNC230
        rec = _Recorder(out)
        neli = Neli(config)
        telemetry = _telemetry(args)
        if telemetry is not None:
            telemetry.observe_neli(neli)
        try:
            await _serve(neli, rec, stop, args)
        finally:
            if telemetry is not None:
                telemetry.shutdown()


async def _serve(neli: Neli, rec: _Recorder, stop: asyncio.Event, args: argparse.Namespace) -> None:
    await neli.start()
    rec.write(
        {"k": "start", "t": time.monotonic(), "pid": os.getpid(), "member_id": neli.member_id}
    )
    tasks = [
        asyncio.create_task(_sample(neli, rec, args.sample_ms / 1000, args.alive_ms / 1000)),
        asyncio.create_task(_events(neli, rec)),
    ]
    waiter = asyncio.create_task(stop.wait())
    failed = asyncio.create_task(neli.wait())
    await asyncio.wait([waiter, failed], return_when=asyncio.FIRST_COMPLETED)
    await neli.close()  # sampling goes on: a hand-over keeps leading while it lasts
    for task in (*tasks, waiter, failed):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    rec.write({"k": "end", "t": time.monotonic()})


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m pricing_ha.local.probe", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--variant", choices=[v.value for v in Variant], default="full")
    parser.add_argument("--mode", choices=[m.value for m in Mode], default="non-exclusive")
    parser.add_argument("--session-ms", type=int, default=3000)
    parser.add_argument("--threshold-ms", type=int, default=None)
    parser.add_argument("--pulse-ms", type=int, default=300)
    parser.add_argument("--sample-ms", type=float, default=2.0)
    parser.add_argument("--alive-ms", type=float, default=20.0)
    parser.add_argument(
        "--trace-file", default=None, help="trace leadership to this JSON-lines file"
    )
    parser.add_argument("--az", default="local", help="availability zone reported in traces")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
