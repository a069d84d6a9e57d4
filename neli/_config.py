"""NELI configuration: one frozen, validated dataclass.

The timing rules of the protocol are checked here, once, so that a running member can never be
in a configuration whose guarantees do not hold:

* non-exclusive mode (*at least one* leader per partition) needs ``T > S``: a partition's old
  leader keeps leading until its successor has been assigned;
* exclusive mode (*at most one* leader) needs ``T + e < S``: the old leader's observations go
  stale before the group coordinator can hand the partition to anyone else;
* the pulse interval must be well below ``T`` (at most ``T / 3``) so one lost heartbeat does not
  cost leadership. This is the library's rule; an application may demand more (pricing-ha's
  configuration requires at most ``T / 4``, so a late heartbeat on top of a lost one does not
  either).
"""

from __future__ import annotations

import enum
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from neli._errors import NeliConfigError


class Mode(enum.Enum):
    """Leadership guarantee."""

    #: At least one leader per partition at all times; overlap is allowed.
    NON_EXCLUSIVE = "non-exclusive"
    #: At most one leader per partition at any instant; gaps are allowed.
    EXCLUSIVE = "exclusive"


class Variant(enum.Enum):
    """Which form of the protocol runs."""

    #: The paper's protocol: every member heartbeats every partition; freshness vector V.
    FULL = "full"
    #: goNELI's variant: leadership from rebalance callbacks, fenced by own heartbeats.
    FAST = "fast"


#: librdkafka settings that NELI owns; the passthrough may not set them.
_OWNED_KEYS = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "session.timeout.ms",
        "auto.offset.reset",
        "enable.partition.eof",
        # The timing argument (T against S) rests on these: see consumer_settings().
        "heartbeat.interval.ms",
        "partition.assignment.strategy",
        "max.poll.interval.ms",
        "group.instance.id",
    }
)


_STRATEGIES = frozenset({"cooperative-sticky", "roundrobin", "range"})


def _default_member_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, kw_only=True)
class NeliConfig:
    """Everything a NELI member needs.

    Attributes:
        bootstrap_servers: Kafka bootstrap servers.
        group_id: the consumer group whose assignment induces leadership.
        topic: the NELI topic C (must exist; its partition count is M).
        variant: full NELI or the fast (goNELI-style) variant.
        mode: non-exclusive (at least one leader) or exclusive (at most one).
        session_timeout_ms: S, the consumer group session timeout.
        threshold_ms: T. ``None`` picks ``2 * S`` in non-exclusive mode and
            ``0.6 * (S - e)`` in exclusive mode.
        pulse_interval_ms: how often heartbeats are published.
        clock_skew_ms: e, the bound on the wall-clock skew between members (exclusive mode).
        check_interval_ms: how often leadership is re-evaluated to emit change events.
        stall_limit_ms: in exclusive mode, a pause of this member longer than this (SIGSTOP,
            VM freeze, starved event loop) makes it wait S + 0.5 s (at least T) before leading
            again, because its assignment may have been taken away while it could not notice
            (and a VM freeze may stop the monotonic clock librdkafka times its session on).
            ``None`` picks ``S / 2``.
        expected_partitions: if set, start() fails unless the topic has exactly this many.
        member_name: a human-readable name for this member (host-pid by default).
        kafka: librdkafka settings for both the consumer and the producer (TLS, SASL, ...).
        consumer: extra librdkafka settings for the consumer only.
        producer: extra librdkafka settings for the producer only.
        barrier_timeout_ms: how long a rebalance may wait for barrier handlers.
        start_timeout_ms: bound on metadata requests at start.
        assignment_strategy: the group's ``partition.assignment.strategy``: ``cooperative-sticky``
            (default: a join or leave moves only the partitions that change owner),
            ``roundrobin`` or ``range`` (eager: every rebalance revokes everything, which is
            slower but simpler for a broker to get right).
        keep_leading_when_isolated: non-exclusive mode only. A member that leads a partition
            keeps leading it, provisionally, when the broker stops answering (its observations
            go stale) or its session is lost, until a new assignment arrives (a partition it
            does not include: until another member is seen leading it) or another member has
            been seen leading the partition for longer than T during this member's term
            (details: :mod:`neli._isolation`). A coordinator stall then
            cannot leave every member of every group leaderless at once (a common-mode
            failure); the price is more overlap, i.e. duplicate work, while the stall lasts.
            Off by default (the paper's rule: stale means not leading).
        max_future_ms: how far ahead of this member's wall clock another member's may be: a
            heartbeat whose send time, term start (``since``) or record timestamp is later than
            now plus this is refused (counted in :attr:`neli.NeliStatus.rejected_heartbeats`,
            never applied), so a forged future timestamp cannot keep a claim alive or end a
            term. ``None`` picks ``max(1000, 2 * e)``; it must be at least e, the bound that
            legitimate members' clocks keep.
    """

    bootstrap_servers: str
    group_id: str
    topic: str
    variant: Variant = Variant.FULL
    mode: Mode = Mode.NON_EXCLUSIVE
    session_timeout_ms: int = 3000
    threshold_ms: int | None = None
    pulse_interval_ms: int = 300
    clock_skew_ms: int = 200
    check_interval_ms: int = 25
    stall_limit_ms: int | None = None
    expected_partitions: int | None = None
    member_name: str = field(default_factory=_default_member_name)
    kafka: Mapping[str, str] = field(default_factory=dict)
    consumer: Mapping[str, str] = field(default_factory=dict)
    producer: Mapping[str, str] = field(default_factory=dict)
    barrier_timeout_ms: int = 30_000
    start_timeout_ms: int = 10_000
    assignment_strategy: str = "cooperative-sticky"
    keep_leading_when_isolated: bool = False
    max_future_ms: int | None = None

    def __post_init__(self) -> None:  # noqa: PLR0912 - one flat list of checks reads best
        for name in ("bootstrap_servers", "group_id", "topic", "member_name"):
            if not getattr(self, name):
                raise NeliConfigError(name, "must not be empty")
        for name in (
            "session_timeout_ms",
            "pulse_interval_ms",
            "check_interval_ms",
            "barrier_timeout_ms",
            "start_timeout_ms",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise NeliConfigError(name, f"must be a positive integer, got {value!r}")
        if self.clock_skew_ms < 0:
            raise NeliConfigError("clock_skew_ms", f"must be >= 0, got {self.clock_skew_ms}")
        s, e = self.session_timeout_ms, self.clock_skew_ms
        t = self.threshold_ms
        if t is None:
            t = 2 * s if self.mode is Mode.NON_EXCLUSIVE else int(0.6 * (s - e))
            object.__setattr__(self, "threshold_ms", t)
        if t <= 0:
            raise NeliConfigError("threshold_ms", f"must be positive, got {t}")
        if self.mode is Mode.NON_EXCLUSIVE and t <= s:
            raise NeliConfigError(
                "threshold_ms",
                f"non-exclusive mode needs threshold T > session timeout S, got T={t} ms, "
                f"S={s} ms (otherwise a partition can be left with no leader)",
            )
        if self.mode is Mode.EXCLUSIVE and t + e >= s:
            raise NeliConfigError(
                "threshold_ms",
                f"exclusive mode needs T + clock skew e < session timeout S, got T={t} ms, "
                f"e={e} ms, S={s} ms (otherwise two members can lead at once)",
            )
        if self.assignment_strategy not in _STRATEGIES:
            raise NeliConfigError(
                "assignment_strategy",
                f"must be one of {', '.join(sorted(_STRATEGIES))}, "
                f"got {self.assignment_strategy!r}",
            )
        if self.keep_leading_when_isolated and self.mode is Mode.EXCLUSIVE:
            raise NeliConfigError(
                "keep_leading_when_isolated",
                "applies to non-exclusive mode only: an isolated member cannot keep an "
                "at-most-one guarantee",
            )
        if self.pulse_interval_ms * 3 > t:
            raise NeliConfigError(
                "pulse_interval_ms",
                f"must be at most T/3 = {t // 3} ms so one lost heartbeat does not cost "
                f"leadership, got {self.pulse_interval_ms} ms",
            )
        if self.stall_limit_ms is None:
            object.__setattr__(self, "stall_limit_ms", s // 2)
        elif not 0 < self.stall_limit_ms < s:
            raise NeliConfigError(
                "stall_limit_ms", f"must be in (0, S={s}) ms, got {self.stall_limit_ms}"
            )
        if self.max_future_ms is None:
            object.__setattr__(self, "max_future_ms", max(1000, 2 * e))
        elif not isinstance(self.max_future_ms, int) or self.max_future_ms < e:
            raise NeliConfigError(
                "max_future_ms",
                f"must be an integer >= clock_skew_ms e={e} ms (members' clocks may be that "
                f"far apart), got {self.max_future_ms!r}",
            )
        if self.expected_partitions is not None and self.expected_partitions < 1:
            raise NeliConfigError("expected_partitions", "must be positive")
        for section in ("kafka", "consumer", "producer"):
            settings: Mapping[str, str] = getattr(self, section)
            for key, value in settings.items():
                if key in _OWNED_KEYS:
                    raise NeliConfigError(
                        f"{section}[{key!r}]",
                        "is owned by NELI; set the corresponding NeliConfig field instead",
                    )
                if key == "group.protocol" and str(value).lower() != "classic":
                    raise NeliConfigError(
                        f"{section}[{key!r}]",
                        "NELI needs the classic group protocol: with KIP-848 "
                        "(group.protocol=consumer) the broker dictates the session timeout, "
                        "which breaks the T/S timing rules",
                    )
            object.__setattr__(self, section, _frozen(settings))

    @property
    def threshold_s(self) -> float:
        """T in seconds."""
        assert self.threshold_ms is not None
        return self.threshold_ms / 1000.0

    @property
    def max_future_s(self) -> float:
        """``max_future_ms`` in seconds."""
        assert self.max_future_ms is not None
        return self.max_future_ms / 1000.0

    @property
    def grace_s(self) -> float:
        """The grace period after a new assignment (exclusive full NELI): T."""
        return self.threshold_s

    @property
    def stores_own_heartbeats(self) -> bool:
        """Whether the committed position is the member's own latest heartbeat (fast
        exclusive), rather than how far it has read."""
        return self.variant is Variant.FAST and self.mode is Mode.EXCLUSIVE

    def consumer_settings(self) -> dict[str, str | int | bool]:
        """The librdkafka consumer configuration NELI runs with."""
        s = self.session_timeout_ms
        settings: dict[str, str | int | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "client.id": f"neli-{self.member_name}",
            "session.timeout.ms": s,
            # The session must not expire because of a slow heartbeat cadence.
            "heartbeat.interval.ms": max(100, s // 4),
            # Heartbeat positions are committed so that a partition's next owner starts just
            # after where its predecessor stopped and reads the predecessor's last heartbeats
            # (which name it and carry its meta, e.g. a trace context to link a fail-over to).
            # Fast exclusive: the position committed is that of the member's own latest
            # heartbeat (stored by the runtime), so the next owner always reads it: the
            # evidence that can end its grace period early (neli._tracker).
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "enable.auto.offset.store": not self.stores_own_heartbeats,
            "auto.offset.reset": "latest",
            "enable.partition.eof": False,
            # Incremental rebalancing: a join or leave moves only the partitions that change
            # owner, so members keep leading everything else through the rebalance.
            "partition.assignment.strategy": self.assignment_strategy,
            "fetch.wait.max.ms": max(10, min(100, self.pulse_interval_ms // 3)),
            "log.connection.close": False,  # idle connections closed by brokers are routine
        }
        settings.update(self.kafka)
        settings.update(self.consumer)
        return settings

    def producer_settings(self) -> dict[str, str | int | bool]:
        """The librdkafka producer configuration used for heartbeats."""
        assert self.threshold_ms is not None
        settings: dict[str, str | int | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": f"neli-{self.member_name}-hb",
            "linger.ms": 0,
            "acks": 1,
            # One request in flight: a member's heartbeats land in the order sent, even across
            # retries (the fast variant's early end of a grace period relies on it).
            "max.in.flight.requests.per.connection": 1,
            # A heartbeat older than T is worthless: never deliver one that late.
            "message.timeout.ms": max(100, self.threshold_ms),
            "log.connection.close": False,
        }
        settings.update(self.kafka)
        settings.update(self.producer)
        return settings
