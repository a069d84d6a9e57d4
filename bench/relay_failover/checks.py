"""What the relay takeover benchmark judges from ``prices`` as read back ``read_committed``.

Pure functions of what its readers kept, so that each rule can be tested on its own:

* :func:`zombie_records`: after a SIGSTOP, the stopped relay's records that a reader sees
  *after* another relay's first price on the partition (the broker should have refused them);
* :func:`takeovers_in`: the takeover control records written in a window (a fault-free window
  should have none: each is a wrong suspicion);
* :func:`relay_section`: the ``[relay]`` section of the relays' configuration file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pricing_ha.config import RelayConfig
from pricing_ha.dedupe.control import TAKEOVER

Rec = tuple[int, int, str]  # a price: offset, timestamp ms, relay
Ctl = tuple[int, int, str, str]  # a control record: offset, timestamp ms, relay, kind

_TAKEOVER = TAKEOVER.decode()


def first_other_price(recs: Iterable[Rec], victim: str, after_ms: float) -> Rec | None:
    """The first price (by offset) on a partition that a relay other than ``victim`` produced
    after ``after_ms`` (None: there is none)."""
    return min(
        (r for r in recs if r[2] != victim and r[1] > after_ms), key=lambda r: r[0], default=None
    )


def zombie_records(recs: list[Rec], controls: list[Ctl], victim: str, stop_ms: float) -> int:
    """How many of ``victim``'s prices lie after another relay's first price produced after
    ``stop_ms`` (the SIGSTOP), on one partition: late records of a deposed owner.

    Once another relay has emitted on the partition, the stopped relay's old term is over: a
    record it produced in that term and that a ``read_committed`` reader still sees after
    the successor's first price is a zombie's write the broker let through. The stopped relay
    may own the partition again later, in a term of its own, which starts with its takeover
    marker: its prices after that marker are not counted.

    Args:
        recs: the partition's prices (offset, timestamp ms, relay), in any order.
        controls: the partition's control records (offset, timestamp ms, relay, kind).
        victim: the stopped relay's member name (the ``relay`` header).
        stop_ms: when it was stopped (epoch ms).
    """
    first = first_other_price(recs, victim, stop_ms)
    if first is None:
        return 0  # nobody else emitted: whatever the victim wrote came from its one term
    retaken = min(
        (
            o
            for o, _, relay, kind in controls
            if relay == victim and kind == _TAKEOVER and o > first[0]
        ),
        default=math.inf,
    )
    return sum(1 for o, _, relay in recs if relay == victim and first[0] < o < retaken)


def takeovers_in(controls: Iterable[Ctl], lo_ms: float, hi_ms: float) -> list[Ctl]:
    """The takeover control records produced in [lo_ms, hi_ms], by timestamp."""
    return sorted(
        (c for c in controls if c[3] == _TAKEOVER and lo_ms <= c[1] <= hi_ms), key=lambda c: c[1]
    )


def relay_section(relay: RelayConfig) -> str:
    """The ``[relay]`` section of a configuration file that sets ``relay``'s timing and
    takeover threshold D, if set (appended to a cluster's file: the relays read it like
    any deployment's)."""
    lines = [
        "[relay]",
        f"session_timeout_ms = {relay.session_timeout_ms}",
        f"threshold_ms = {relay.threshold_ms}",
        f"clock_skew_ms = {relay.clock_skew_ms}",
        f"pulse_interval_ms = {relay.pulse_interval_ms}",
        f"output_timeout_ms = {relay.output_timeout_ms}",
    ]
    if relay.takeover_after_ms is not None:  # unset: the relay's own default
        lines.append(f"takeover_after_ms = {relay.takeover_after_ms}")
    return "\n".join([*lines, ""])
