"""The configuration sections of the long-running roles: their groups, NELI timing and verdicts.

``[groups]`` (which groups a deployment has), ``[neli]`` (the publishing groups), ``[relay]``
and ``[subscriber]``; the timing rules they check are those of docs/architecture.md §3. Import
these names from :mod:`pricing_ha.config`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pricing_ha.config._sections import check, check_ms

__all__ = ["GroupsConfig", "PublisherNeliConfig", "RelayConfig", "SubscriberConfig"]

# Group names become part of Kafka consumer group ids (``pricing.<name>``), metric labels and
# member names (``<group>/<member>``): keep them to characters that are safe in all three.
_GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Below this, a member's heartbeats (every S / 3) leave too little room for a loaded host's
# scheduling, and sessions expire with nothing wrong.
_MIN_SESSION_TIMEOUT_MS = 1000
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
        session_timeout_ms: S, the consumer ``session.timeout.ms``. At least 1000; the broker
            enforces its ``group.min.session.timeout.ms`` (6000 by default on Apache Kafka and
            MSK, 500 on the local broker). Default 3000.
        threshold_ms: T, how long an observation of a partition stays fresh; must exceed S so
            that every role has at least one leader. Default 4500.
        pulse_interval_ms: heartbeat interval; at least four pulses must fit in T. Default 1000:
            every member of a full-NELI group heartbeats every partition each pulse.
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


_MIN_OUTPUT_TIMEOUT_MS = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class RelayConfig:
    """The dedupe relay: exclusive ownership, so T + e < S (docs/architecture.md, timing).

    Attributes:
        session_timeout_ms: S for the relay's group. At least 1000. Default 1000.
        threshold_ms: T, the self-heartbeat deadline after which an owner fences itself, and
            the grace period after a new assignment. Default 600.
        clock_skew_ms: e, the bound on clock skew between relay hosts. Default 200.
        pulse_interval_ms: self-heartbeat interval; at least four pulses fit in T. Default 150.
        output_timeout_ms: the ``message.timeout.ms`` of the relay's output to ``prices``: a
            record not acknowledged this long after it was produced fails instead of being
            sent late. At least 500, at most S. Default 1000.
        reorder_window_ms: how long to wait for a missing seq from the other group's copy
            before declaring a gap. Default 500: a missing copy costs at most this much delay,
            while a shorter window turns a briefly lagging group into a declared gap (a copy
            arriving after its seq was declared missing cannot be delivered in order).
        assignment_strategy: the relay group's rebalance protocol. Default ``"roundrobin"``
            (eager: every partition is revoked and assigned again, and the relay hands each
            over, the old owner emitting until its successor asks, so a join costs no
            silence).
        takeover_after_ms: D, how long a partition of ``prices`` must be quiet (no record on
            it, no heartbeat of a member claiming it) before the one live member that
            rendezvous hashing names takes it over, fenced by the broker, without waiting
            for the group to notice (``pricing_ha/dedupe/detector.py``). At least two
            pulses, so that one late heartbeat of a live owner does not look like a crash; 0
            turns detection off (a crash then costs S and a rebalance). Default (unset):
            350, or two pulses if that is more.

    The relay always fences by the broker: each owned partition of ``prices`` is written by a
    transactional producer of its own (``transactional.id`` derived from the partition), so a
    takeover's ``init_transactions`` makes the broker reject the previous owner's writes and
    abort its open transaction, and the new owner need not wait out a grace period;
    subscribers read ``read_committed``. A ``fencing`` key is refused (:attr:`REMOVED_KEYS`).

    Why S = 1000 ms: a relay crash is paid in full on ``prices``: the coordinator evicts the
    dead owner S after its last heartbeat, the group rebalances (on Apache Kafka, once every
    live member has rejoined: within a heartbeat interval), and the successor fences and
    takes over. The publishing groups hide each other's crashes, so they can afford a longer
    S; the relay cannot. The local broker allows sessions down to 500 ms
    (``group.min.session.timeout.ms``, pricing_ha/local/broker.py); Amazon MSK's default is
    6000 ms, and its cluster configuration must lower it to 1000 ms for this default
    (deploy/terraform sets it). T + e < S leaves T = 600 ms at e = 200 ms; with fencing by
    the broker, T only bounds how long an owner that cannot see its own heartbeat keeps
    emitting, and four pulses of 150 ms fit in it.
    """

    session_timeout_ms: int = 1000
    threshold_ms: int = 600
    clock_skew_ms: int = 200
    pulse_interval_ms: int = 150
    output_timeout_ms: int = 1000
    reorder_window_ms: int = 500
    assignment_strategy: str = "roundrobin"
    takeover_after_ms: int | None = None

    @property
    def takeover_after_s(self) -> float:
        """D in seconds (0: detection off), the default applied."""
        if self.takeover_after_ms is None:
            return max(350, 2 * self.pulse_interval_ms) / 1000
        return self.takeover_after_ms / 1000

    #: Keys an old configuration may still set, and why they are refused.
    REMOVED_KEYS: ClassVar[Mapping[str, str]] = {
        "fencing": "removed: the relay always fences by the broker's transactions (Apache "
        "Kafka), and 'none' (owners kept apart by time alone) is no longer supported; "
        "delete this key",
    }

    def __post_init__(self) -> None:
        check(
            self.takeover_after_ms is None
            or self.takeover_after_ms == 0
            or self.takeover_after_ms >= 2 * self.pulse_interval_ms,
            self,
            "takeover_after_ms",
            f"must be 0 (off) or at least two pulses (2 x pulse_interval_ms = "
            f"{2 * self.pulse_interval_ms}), got {self.takeover_after_ms}",
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
            off. Default 30000 (the relay's worst measured fail-over fits under it; see
            docs/benchmarks.md).
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
