"""Polling until a condition holds, with a bound: the one deadline loop of the demo, the tests and
the benchmarks.

``wait_for`` blocks the calling thread; ``wait_for_async`` sleeps with ``asyncio.sleep`` so that
members running on the test's event loop keep running while it waits. Both call the predicate
and sleep ``interval_s`` until it holds or ``timeout_s`` has passed, then fail with an
``AssertionError`` naming ``what``: a string, or a function called only on timeout (for costly
diagnostics). ``interval_s`` 0 polls again at once, for predicates that block on I/O themselves.
It defaults to 0.5 s for ``wait_for``, whose predicates mostly read whole topics, and to 0.05 s
for ``wait_for_async``, whose predicates look at members running in the test's own process.
``wait_until`` is the same loop for a caller that carries on either way (a benchmark that records
a miss): it answers ``True`` or ``False`` instead of raising.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

Predicate = Callable[[], bool]
What = str | Callable[[], str]


def wait_for(
    predicate: Predicate, timeout_s: float, what: What, *, interval_s: float = 0.5
) -> float:
    """Poll ``predicate`` until it holds; return the monotonic time it did, or fail."""
    for _ in _until_deadline(timeout_s):
        if predicate():
            return time.monotonic()
        time.sleep(interval_s)
    raise _timed_out(timeout_s, what)


async def wait_for_async(
    predicate: Predicate, timeout_s: float, what: What, *, interval_s: float = 0.05
) -> float:
    """:func:`wait_for` without blocking the event loop."""
    for _ in _until_deadline(timeout_s):
        if predicate():
            return time.monotonic()
        await asyncio.sleep(interval_s)
    raise _timed_out(timeout_s, what)


def wait_until(cond: Predicate, timeout_s: float, poll_s: float = 0.1) -> bool:
    """Poll ``cond`` until it holds (True) or ``timeout_s`` passes (False, after a last look)."""
    for _ in _until_deadline(timeout_s):
        if cond():
            return True
        time.sleep(poll_s)
    return bool(cond())


def _until_deadline(timeout_s: float) -> Iterator[None]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        yield


def _timed_out(timeout_s: float, what: What) -> AssertionError:
    described = what if isinstance(what, str) else what()
    return AssertionError(f"timed out after {timeout_s:.1f} s waiting for {described}")
