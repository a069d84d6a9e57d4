"""The configuration sections of the long-running roles: their groups, NELI timing and verdicts.

``[groups]`` (which groups a deployment has), ``[neli]`` (the publishing groups), ``[relay]``
and ``[subscriber]``; the timing rules they check are those of docs/architecture.md §3. Import
these names from :mod:`pricing_ha.config`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pricing_ha.config._sections import check, check_ms

__all__ = ["GroupsConfig", "PublisherNeliConfig", "RelayConfig", "SubscriberConfig"]

# Group names become part of Kafka consumer group ids (``pricing.<name>``), metric labels and
# member names (``<group>/<member>``): keep them to characters that are safe in all three.
_GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MIN_SESSION_TIMEOUT_MS = 1000  # below this the embedded broker's groups churn forever
_PULSES_PER_THRESHOLD = 4  # heartbeats that fit in T, so one late pulse never costs leadership


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupsConfig:
    """The NELI groups of one deployment (docs/architecture.md §2.3).

    ``pricing-ha run --group`` accepts only a name of ``publishing`` and ``pricing-ha dedupe``
    only ``relay`` (a typo would otherwise start a group nobody watches); ``pricing-ha status``
    lists each of them, marking those no member heartbeats for.

    Attributes:
        publishing: the publishing groups, each an independent copy of the whole price feed
            (in production, one per availability zone). Default ``("p1", "p2")``.
        relay: the relay group (one per deployment). Default ``"relay"``.
    """

    publishing: tuple[str, ...] = ("p1", "p2")
    relay: str = "relay"

    def __post_init__(self) -> None:
        check(bool(self.publishing), self, "publishing", "must name at least one group")
        for key, names in (("publishing", self.publishing), ("relay", (self.relay,))):
            for name in names:
                check(
                    _GROUP_NAME.fullmatch(name) is not None,
                    self,
                    key,
                    f"{name!r} is not a valid group name (letters, digits, '.', '_', '-'; "
                    "starting with a letter or digit)",
                )
        check(
            len(set(self.publishing)) == len(self.publishing),
            self,
            "publishing",
            f"names a group twice: {', '.join(self.publishing)}",
        )
        check(
            self.relay not in self.publishing,
            self,
            "relay",
            f"{self.relay!r} is also a publishing group; the relay needs a group of its own",
        )

    @property
    def names(self) -> tuple[str, ...]:
        """Every group: the publishing groups, then the relay group."""
        return (*self.publishing, self.relay)


@dataclass(frozen=True, kw_only=True, slots=True)
class PublisherNeliConfig:
    """Leader induction for the publisher groups: non-exclusive, T > S (docs/architecture.md §3).

    Attributes:
        session_timeout_ms: S, the consumer ``session.timeout.ms``. At least 1000 (the embedded
            broker); a real Kafka enforces its ``group.min.session.timeout.ms`` (6000 by
            default). Default 3000.
        threshold_ms: T, how long an observation of a partition stays fresh; must exceed S so
            that every role has at least one leader. Default 4500.
        pulse_interval_ms: heartbeat interval; at least four pulses must fit in T. Default 1000:
            every member of a full-NELI group heartbeats every partition each pulse, and the
            embedded broker's cost of every fetch grows with the records a partition holds,
            so a faster pulse costs the whole pipeline (docs/architecture.md §7).
        keep_leading_when_isolated: a member keeps publishing the partitions it led,
            provisionally, through a broker or coordinator stall or a session loss, until
            another member of its group is seen leading them (see :class:`neli.NeliConfig`).
            The group coordinator is shared by both publishing groups, so without this a stall
            longer than S revokes both groups at once. The cost is duplicates on
            ``prices.raw`` during the stall, which the relay drops.
            Default true.
    """

    session_timeout_ms: int = 3000
    threshold_ms: int = 4500
    pulse_interval_ms: int = 1000
    keep_leading_when_isolated: bool = True

    def __post_init__(self) -> None:
        check_ms(self, "session_timeout_ms", self.session_timeout_ms, _MIN_SESSION_TIMEOUT_MS)
        check(
            self.threshold_ms > self.session_timeout_ms,
            self,
            "threshold_ms",
            f"non-exclusive publishers need threshold_ms > session_timeout_ms "
            f"({self.threshold_ms} <= {self.session_timeout_ms})",
        )
        _check_pulse(self, self.pulse_interval_ms, self.threshold_ms)


def _check_pulse(owner: object, pulse_ms: int, threshold_ms: int) -> None:
    check_ms(owner, "pulse_interval_ms", pulse_ms, 10)
    check(
        pulse_ms * _PULSES_PER_THRESHOLD <= threshold_ms,
        owner,
        "pulse_interval_ms",
        f"must be at most threshold_ms / {_PULSES_PER_THRESHOLD} "
        f"({pulse_ms} > {threshold_ms // _PULSES_PER_THRESHOLD})",
    )


_FENCING = ("transactions", "none")
_MIN_OUTPUT_TIMEOUT_MS = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class RelayConfig:
    """The dedupe relay: exclusive ownership, so T + e < S (docs/architecture.md §3).

    Attributes:
        session_timeout_ms: S for the relay's group. At least 1000. Default 2000.
        threshold_ms: T, the self-heartbeat deadline after which an owner fences itself, and
            the grace period after a new assignment. Default 1600.
        clock_skew_ms: e, the bound on clock skew between relay hosts. Default 200.
        pulse_interval_ms: self-heartbeat interval; at least four pulses fit in T. Default 300.
        output_timeout_ms: the ``message.timeout.ms`` of the relay's output to ``prices``: a
            record not acknowledged this long after it was produced fails instead of being
            sent late. So a crashed or deposed owner's output has landed or expired T + e +
            this after its last heartbeat, and that is how long its successor waits (see
            below). At least 500, at most S. Default 1000.
        reorder_window_ms: how long to wait for a missing seq from the other group's copy
            before declaring a gap. Default 500: a missing copy costs at most this much delay,
            while a shorter window turns a briefly lagging group into a declared gap (a copy
            arriving after its seq was declared missing cannot be delivered in order).
        assignment_strategy: the relay group's rebalance protocol (see below). Default
            ``"roundrobin"``.
        fencing: ``"transactions"``: each owned partition of ``prices`` is written by a
            transactional producer of its own (``transactional.id`` derived from the
            partition), so a takeover's ``init_transactions`` makes the broker reject the
            previous owner's writes, and the new owner need not wait out a grace period: use
            it on Apache Kafka. ``"none"`` (default): one idempotent producer; the grace
            period T keeps owners apart. The default is ``"none"`` because the embedded
            broker (tests, the demo) slows down as transactions accumulate: in a 10-minute
            benchmark (one commit per partition per batch) its CPU grew to 125 % of a core
            and relay fail-overs grew from 6 s to 50 s (docs/architecture.md §7).

    Why S = 2000 ms: a crash costs the session timeout S (the coordinator evicts the dead
    owner when a live member next calls, S after the owner's last call), then a rebalance, then
    the grace period T. The embedded broker answers a JoinGroup only after pausing in 1 s steps
    until S / 2 has passed, so every rebalance costs 1 s at S <= 2000 ms and 2 s at S = 3000 ms
    (measured: a SIGKILLed owner's partitions emitted again 6.0-7.3 s after the kill at S = 3000,
    T = 2000, and 4.5-4.9 s at S = 2000, T = 1600). Groups on that broker were measured stable
    down to S = 1000 ms; 2000 ms keeps a margin for a loaded 2-core machine. The cost: a broker
    stall of S or longer expires the relays' sessions (they release, rejoin and take their
    partitions back without a grace period, since the releases were clean), and that broker
    holds a rejoining member that is not the group's leader 3 s before it answers: a 2 s stall
    cost 7.5-8.9 s of silence on ``prices`` in the fault drill.

    Why ``output_timeout_ms`` = 1000 (not S, as before): after a crash the successor waits until
    T + e + output_timeout after the dead owner's last heartbeat, and it is assigned about
    S + 1 s (the broker's rebalance) after the crash. At output_timeout = S = 2000 the wait
    ended 3.5-3.8 s after the crash, later than the assignment; at 1000 it ends 2.5-2.8 s
    after, so detection alone sets the pace. The cost: the broker must acknowledge the relay's
    output within 1 s, or the partition's output fails and is re-established from the end of
    ``prices``. In two 15-minute takeover benchmarks on a 2-core machine at load 4-6, none of
    the 24 relays that stopped cleanly had a single delivery failure; a broker stall of that
    length costs the relays their sessions anyway. Above S it would outlast the wait after a
    pause (about 0.75 S + T), hence the bound.

    Why T = 1600 ms, above the fast variant's "T at most S / 3" rule of thumb: the rule leaves
    room for the owner's clock and its heartbeat round trip, and for a pause between asking and
    acting. Here the invariant itself is enforced (T + e < S, checked above), a pause is caught
    by the stall guard (stall_limit S / 2: a member that was frozen longer waits S + 0.5 s
    before emitting again), and every record is produced only after ``leads()`` says yes at
    that instant. T = S / 3 = 667 ms would make an owner fence itself whenever its own
    heartbeat round trip exceeds 0.67 s, which on a loaded 2-core machine happens often
    (self-fencing flaps) and buys no safety the checks above do not already give. On real
    Kafka, whose brokers refuse sessions below ``group.min.session.timeout.ms`` (6000 by
    default), use S = 6000, T = 4000, e = 500, output_timeout_ms = 2000; a rebalance there
    ends once every member has rejoined.

    ``assignment_strategy`` is ``roundrobin`` (eager) for the relay. On the embedded broker,
    a member leaving in the middle of a rebalance (a SIGTERM hand-over just as a new relay
    joins) left the remaining relay unassigned for good: ``prices`` silent until a restart.
    :meth:`neli.Neli.close` now lets a rebalance in progress finish before it leaves, which
    cures the eager protocol; a cooperative rebalance has two rounds and still wedged in the
    same test. An eager rebalance revokes every partition and assigns again; the relay hands
    each over (the old owner emits until its successor asks), so a join costs no silence.
    """

    session_timeout_ms: int = 2000
    threshold_ms: int = 1600
    clock_skew_ms: int = 200
    pulse_interval_ms: int = 300
    output_timeout_ms: int = 1000
    reorder_window_ms: int = 500
    assignment_strategy: str = "roundrobin"
    fencing: str = "none"

    def __post_init__(self) -> None:
        check(
            self.fencing in _FENCING,
            self,
            "fencing",
            f"must be one of {', '.join(repr(f) for f in _FENCING)}, got {self.fencing!r}",
        )
        check_ms(self, "session_timeout_ms", self.session_timeout_ms, _MIN_SESSION_TIMEOUT_MS)
        check_ms(self, "threshold_ms", self.threshold_ms)
        check_ms(self, "clock_skew_ms", self.clock_skew_ms, 0)
        check(
            self.threshold_ms + self.clock_skew_ms < self.session_timeout_ms,
            self,
            "threshold_ms",
            f"exclusive ownership needs threshold_ms + clock_skew_ms < session_timeout_ms "
            f"({self.threshold_ms} + {self.clock_skew_ms} >= {self.session_timeout_ms})",
        )
        _check_pulse(self, self.pulse_interval_ms, self.threshold_ms)
        check_ms(self, "output_timeout_ms", self.output_timeout_ms, _MIN_OUTPUT_TIMEOUT_MS)
        check(
            self.output_timeout_ms <= self.session_timeout_ms,
            self,
            "output_timeout_ms",
            f"must be at most session_timeout_ms ({self.session_timeout_ms}), "
            f"got {self.output_timeout_ms}",
        )
        check(
            0 <= self.reorder_window_ms < self.threshold_ms,
            self,
            "reorder_window_ms",
            f"must be between 0 and threshold_ms ({self.threshold_ms}), "
            f"got {self.reorder_window_ms}",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class SubscriberConfig:
    """What ``pricing-ha subscribe`` (and the subscriber library) judges a stream by.

    Attributes:
        max_silence_ms: the staleness bound. The verdict fails (``ok = false``) when any
            instrument was silent for longer: between two deliveries, or while other
            instruments were delivered. Set it to the service's promise; 0 turns the check
            off. Default 30000 (the relay's worst measured fail-over fits under it; see the
            README's figures).
    """

    max_silence_ms: int = 30_000

    def __post_init__(self) -> None:
        check(
            self.max_silence_ms >= 0,
            self,
            "max_silence_ms",
            f"must be >= 0 (0: no bound), got {self.max_silence_ms}",
        )

    @property
    def max_silence_bound_s(self) -> float | None:
        """The bound in seconds, or ``None`` when the check is off."""
        return self.max_silence_ms / 1000 if self.max_silence_ms else None
