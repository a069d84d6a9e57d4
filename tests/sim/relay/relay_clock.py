"""The relay simulation's clock: simulated time in place of the ``time`` module and of the
standby tails' condition variables.

* :class:`SimTime` replaces the ``time`` module inside the relay's modules. ``monotonic`` is
  the simulated clock; ``sleep`` advances it and lets every standby tail read (the tails are
  threads of their own in production, so they make progress while a worker sleeps).
* :class:`PumpCondition` replaces each standby tail's condition variable: a worker waiting in
  ``snapshot_at`` advances the clock by its wait and lets the tails read, instead of blocking.
* :func:`simulated_time` installs a :class:`SimTime` in every relay module that reads the
  ``time`` module, and :func:`real_clocks` finds a real clock still held by a worker.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pricing_ha.dedupe
from pricing_ha.member import worker as worker_mod

if TYPE_CHECKING:
    from tests.sim.relay.relay_world import World


class SimTime:
    """A stand-in for the ``time`` module: a simulated clock shared by the whole world."""

    def __init__(self) -> None:
        """Start the clock at an arbitrary instant."""
        self.now = 1000.0
        self.world: World | None = None

    def monotonic(self) -> float:
        """The simulated monotonic clock."""
        return self.now

    def time(self) -> float:
        """Wall time, tied to the simulated clock."""
        return 1_700_000_000.0 + self.now

    def time_ns(self) -> int:
        """Wall time in ns."""
        return int(self.time() * 1e9)

    def advance(self, seconds: float) -> None:
        """Move the clock on."""
        self.now += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        """A worker sleeps: time passes and the tails (other threads) read."""
        self.advance(seconds)
        if self.world is not None:
            self.world.pump()


class PumpCondition:
    """A tail's condition variable whose ``wait`` lets simulated time pass instead."""

    def __init__(self, clock: SimTime) -> None:
        """Wrap the shared clock."""
        self._clock = clock

    def __enter__(self) -> PumpCondition:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def notify_all(self) -> None:
        """Nobody blocks in the simulation."""

    def wait(self, timeout: float | None = None) -> bool:
        """Time passes; the tails read."""
        self._clock.sleep(timeout or 0.0)
        return True


_REAL_CLOCKS = (time.monotonic, time.time, time.time_ns, time.perf_counter)


def _decides(kind: type) -> bool:
    """Whether objects of ``kind`` can steer the relay: the project's own, but for its
    telemetry (metrics read clocks for what they report, and nothing reads them back)."""
    module = getattr(kind, "__module__", "")
    return module.startswith("pricing_ha") and not module.startswith("pricing_ha.telemetry")


def real_clocks(root: object, depth: int = 4) -> list[str]:
    """Where, among ``root``'s attributes (followed ``depth`` objects deep), a real clock
    function is held: a run would then depend on the machine's clocks, not only on its seed.

    (It happened: a worker command's creation time came from the real monotonic clock and its
    age from the simulated one, so on a machine up for less than the simulated clock's start
    every simulated hand-over was refused as too old.)
    """
    found: list[str] = []
    seen: set[int] = set()

    def walk(obj: object, path: str, left: int) -> None:
        if id(obj) in seen or left < 0:
            return
        seen.add(id(obj))
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            return
        for name, value in attrs.items():
            if any(value is c for c in _REAL_CLOCKS):
                found.append(f"{path}.{name}")
            elif _decides(type(value)):
                walk(value, f"{path}.{name}", left - 1)

    walk(root, type(root).__name__, depth)
    return found


def _time_users() -> list[Any]:
    """The relay's modules that read the ``time`` module: every module of
    :mod:`pricing_ha.dedupe` that imports it, and the partition worker's. Found, not listed, so
    that a new module cannot run on the real clock inside a simulation."""
    package = pricing_ha.dedupe
    names = [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    mods = [importlib.import_module(name) for name in names]
    return [m for m in [*mods, worker_mod] if getattr(m, "time", None) is time]


@contextmanager
def simulated_time(clock: SimTime) -> Iterator[None]:
    """The relay's modules see ``clock`` as their ``time`` module; their logs are quiet."""
    mods = _time_users()
    saved = [m.time for m in mods]
    quiet = logging.getLogger("pricing_ha")
    level, quiet_level = quiet.level, logging.CRITICAL
    try:
        for m in mods:
            m.time = clock
        quiet.setLevel(quiet_level)
        yield
    finally:
        for m, t in zip(mods, saved, strict=True):
            m.time = t
        quiet.setLevel(level)
