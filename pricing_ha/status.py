"""``pricing-ha status``: who leads what, in every group sharing the NELI topic, and how fresh.

Every NELI member names the partitions it leads in each heartbeat, so reading the NELI topic
for a couple of pulses shows every live member of every group (publishers p1, p2 and the relay)
as it reports itself. No broker-side group description is needed: it would show what each
member is assigned, not what it leads (a new owner in its grace period, a publisher leading
provisionally through a stall), and only for groups this client may describe.
Every group the configuration names (``[groups]``: the publishing groups and the relay group) is
listed whether or not it heartbeats, so a group with no live member shows as **absent** (all its
partitions unled) instead of silently missing; groups seen on the topic but not configured are
listed too, marked as such.

``pricing-ha status --instrument SYM`` answers for one instrument: which member of each group owns
its partition now, since when, and how stale that answer can be, with
:class:`neli.wire.OwnerDirectory` fed by the same read. The staleness bound: an owner is named from
its latest heartbeat, so it may have stopped leading up to that heartbeat's age plus the clock skew
e between its host and this one; claims older than three pulses are dropped; a new owner shows up
one pulse plus the delivery delay after it starts leading. The answer is a routing hint: every
member checks its own ``leads()`` at the moment it acts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from neli.wire import Heartbeat, HeartbeatDecodeError, OwnerDirectory
from pricing_ha.config import AppConfig
from pricing_ha.errors import TopicLayoutError
from pricing_ha.kafka.client_log import client_log_settings
from pricing_ha.kafka.partitioning import instrument_partition
from pricing_ha.kafka.topics import fetch_metadata

#: Claims not renewed for this many pulses are dropped (one or two lost heartbeats are fine).
_PULSES_OF_AGE = 3


@dataclass(frozen=True)
class MemberStatus:
    """The latest heartbeat of one member."""

    group: str
    member: str
    led: tuple[int, ...]
    age_s: float


@dataclass(frozen=True)
class GroupStatus:
    """One group as the heartbeats show it.

    Attributes:
        group: the NELI consumer group id (``pricing.p1``).
        role: ``"publishing"`` or ``"relay"`` for a configured group, ``"unconfigured"`` for a
            group seen on the NELI topic that the configuration does not name.
        absent: no member of the group heartbeated during the read.
        members: the latest heartbeat of each member seen.
        unled: the partitions no member claims (all of them when the group is absent).
    """

    group: str
    role: str
    absent: bool
    members: tuple[MemberStatus, ...]
    unled: tuple[int, ...]


def group_status(
    members: Sequence[MemberStatus], configured: Sequence[tuple[str, str]], partitions: int
) -> list[GroupStatus]:
    """Every configured group (in the given order), then every other group seen, by name.

    Args:
        members: what :func:`read_status` returned.
        configured: ``(group id, role)`` of each configured group.
        partitions: M, the NELI topic's partition count.
    """
    roles = dict(configured)
    seen = sorted({m.group for m in members} - set(roles))
    out = []
    for group in [*roles, *seen]:
        mine = tuple(m for m in members if m.group == group)
        led = {p for m in mine for p in m.led}
        out.append(
            GroupStatus(
                group=group,
                role=roles.get(group, "unconfigured"),
                absent=not mine,
                members=mine,
                unled=tuple(p for p in range(partitions) if p not in led),
            )
        )
    return out


@dataclass(frozen=True)
class InstrumentOwner:
    """A member that owns the instrument's partition, by its own heartbeats.

    Attributes:
        member: the member's name; ``member_id`` its unique id (name plus start).
        since_wall: send time of the first heartbeat of its current unbroken run of claims.
        since_exact: False when that run began before this read did, so ``since_wall`` is only
            the earliest instant this read can vouch for (the member led at least that long).
        age_s: age of its latest heartbeat claiming the partition.
    """

    member: str
    member_id: str
    since_wall: float
    since_exact: bool
    age_s: float


@dataclass(frozen=True)
class GroupOwners:
    """The owners of one partition in one group; ``stale_by_s`` is the answer's bound.

    ``stale_by_s``: an owner named may have stopped leading up to this long ago (its latest
    heartbeat's age plus the clock skew e); None when no owner is named.
    """

    group: str
    owners: tuple[InstrumentOwner, ...]
    stale_by_s: float | None


@dataclass(frozen=True)
class InstrumentStatus:
    """Who owns one instrument now, in every group.

    Attributes:
        instrument: the symbol.
        partition: its partition (``murmur2(symbol) mod M``), the same on every keyed topic.
        partitions: M, the NELI topic's partition count.
        at_wall: when the answer was made (this host's wall clock).
        window_s: how long heartbeats were read before answering.
        max_age_s: claims not renewed for this long were dropped.
        clock_skew_s: e, the bound on wall-clock skew between hosts (``relay.clock_skew_ms``).
        new_owner_delay_s: a new owner may be missing for up to about this long (one pulse).
        groups: one entry per group, the expected groups first.
    """

    instrument: str
    partition: int
    partitions: int
    at_wall: float
    window_s: float
    max_age_s: float
    clock_skew_s: float
    new_owner_delay_s: float
    groups: tuple[GroupOwners, ...]


def _read_heartbeats(
    cfg: AppConfig, window_s: float, on_heartbeat: Callable[[Heartbeat], None]
) -> tuple[int, float]:
    """Read the NELI topic from its end for ``window_s``, handing each heartbeat over.

    Returns:
        The NELI topic's partition count (0 when it does not exist) and the wall time at which
        reading began.

    Raises:
        BrokerUnavailableError: the broker did not answer within ``broker.connect_timeout_ms``.
    """
    topic = cfg.topics.neli
    consumer = Consumer(
        {
            **cfg.broker.client_config(
                defaults={"log.connection.close": False},
                required={"group.id": "pricing-ha-status", "enable.auto.commit": False},
            ),
            **client_log_settings(),
        }
    )
    try:
        md = fetch_metadata(
            consumer, cfg.broker.bootstrap_servers, cfg.broker.connect_timeout_ms / 1000
        )
        meta = md.topics.get(topic)
        count = len(meta.partitions) if meta is not None and meta.partitions else 0
        consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(count)])
        future_s = max(1.0, 2 * cfg.relay.clock_skew_ms / 1000)  # NeliConfig's default bound
        started = time.time()
        deadline = time.monotonic() + window_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            try:  # refuse what members refuse: hostile records, forged future claims
                hb = Heartbeat.decode(
                    msg.value(), not_after_wall=time.time() + future_s, partitions=count
                )
            except HeartbeatDecodeError:
                continue
            on_heartbeat(hb)
    finally:
        consumer.close()
    return count, started


def read_status(cfg: AppConfig, window_s: float = 2.0) -> list[MemberStatus]:
    """Read the NELI topic for ``window_s`` and return the latest state of each member seen."""
    latest: dict[str, Heartbeat] = {}

    def keep(hb: Heartbeat) -> None:
        seen = latest.get(hb.member_id)
        if seen is None or hb.sent_wall >= seen.sent_wall:
            latest[hb.member_id] = hb

    _read_heartbeats(cfg, window_s, keep)
    now = time.time()
    return sorted(
        (
            MemberStatus(hb.group, hb.member_name, hb.led, max(0.0, now - hb.sent_wall))
            for hb in latest.values()
        ),
        key=lambda m: (m.group, m.member),
    )


def max_claim_age_s(cfg: AppConfig) -> float:
    """How long a claim lasts without a heartbeat: three of the slower pulse (publishers, relay)."""
    pulse_ms = max(cfg.neli.pulse_interval_ms, cfg.relay.pulse_interval_ms)
    return _PULSES_OF_AGE * pulse_ms / 1000


def instrument_owners(
    directory: OwnerDirectory,
    instrument: str,
    groups: Sequence[str],
    *,
    now_wall: float,
    window_s: float,
    clock_skew_s: float,
    new_owner_delay_s: float,
) -> InstrumentStatus:
    """The owners of ``instrument`` in ``groups`` (and in any other group seen), from claims."""
    partition = instrument_partition(instrument, directory.partitions)
    answers = []
    for group in [*groups, *sorted(directory.groups() - set(groups))]:
        owners = tuple(
            InstrumentOwner(
                member=o.member_name,
                member_id=o.member_id,
                since_wall=o.since_wall,
                since_exact=directory.since_is_exact(o),
                age_s=max(0.0, now_wall - o.last_seen_wall),
            )
            for o in directory.partition_owners(group, partition, now_wall)
        )
        stale = max((o.age_s for o in owners), default=None)
        answers.append(
            GroupOwners(group, owners, None if stale is None else round(stale + clock_skew_s, 3))
        )
    return InstrumentStatus(
        instrument=instrument,
        partition=partition,
        partitions=directory.partitions,
        at_wall=now_wall,
        window_s=window_s,
        max_age_s=directory.max_age_s,
        clock_skew_s=clock_skew_s,
        new_owner_delay_s=new_owner_delay_s,
        groups=tuple(answers),
    )


def read_instrument_owners(
    cfg: AppConfig, instrument: str, groups: Sequence[str], window_s: float = 2.0
) -> InstrumentStatus:
    """Read the NELI topic for ``window_s``, then say who owns ``instrument`` in each group.

    Args:
        cfg: the configuration (broker, NELI topic, pulses, clock skew).
        instrument: the symbol (the caller checks that it is a known one).
        groups: the NELI groups to answer for even if none of their members heartbeats
            (``pricing.p1``, ``pricing.p2``, ``pricing.relay``); other groups seen are added.
        window_s: how long to read; at least a few pulses.

    Raises:
        BrokerUnavailableError: the broker did not answer within ``broker.connect_timeout_ms``.
        TopicLayoutError: the NELI topic does not exist.
    """
    heartbeats: list[Heartbeat] = []
    partitions, started = _read_heartbeats(cfg, window_s, heartbeats.append)
    if partitions == 0:
        raise TopicLayoutError(
            f"the NELI topic {cfg.topics.neli!r} does not exist on "
            f"{cfg.broker.bootstrap_servers} (create the topics with `pricing-ha topics create`)"
        )
    directory = OwnerDirectory(partitions, max_claim_age_s(cfg), observed_from_wall=started)
    for hb in heartbeats:
        directory.observe(hb)
    pulse_s = max(cfg.neli.pulse_interval_ms, cfg.relay.pulse_interval_ms) / 1000
    return instrument_owners(
        directory,
        instrument,
        groups,
        now_wall=time.time(),
        window_s=window_s,
        clock_skew_s=cfg.relay.clock_skew_ms / 1000,
        new_owner_delay_s=pulse_s,
    )


def render(groups: Sequence[GroupStatus], window_s: float) -> str:
    """A block per group: members, led partitions, unled partitions; absent groups marked."""
    lines: list[str] = []
    for g in groups:
        note = "" if g.role != "unconfigured" else " (not in the configuration's [groups])"
        if g.absent:
            lines.append(
                f"group {g.group} [{g.role}]{note}: ABSENT (no heartbeat in {window_s:g} s)"
            )
        else:
            lines.append(f"group {g.group} [{g.role}]{note}")
        for m in g.members:
            led = ",".join(map(str, m.led)) or "-"
            lines.append(f"  {m.member:<28} leads {led:<20} last heartbeat {m.age_s:5.2f} s ago")
        unled = ",".join(map(str, g.unled)) if g.unled else "none"
        lines.append(f"  unled partitions: {unled}")
    problems = [g for g in groups if g.absent or g.unled]
    if problems:
        lines.append(
            f"attention: {len(problems)} group(s) absent or with unled partitions: "
            + ", ".join(g.group for g in problems)
        )
    return "\n".join(lines)


def _clock(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall)) + f".{int(wall % 1 * 1000):03d}"


def render_owners(status: InstrumentStatus) -> str:
    """The owners of one instrument in every group, with since when and the staleness bound."""
    s = status
    lines = [f"instrument {s.instrument}: partition {s.partition} of {s.partitions}"]
    for g in s.groups:
        if not g.owners:
            lines.append(
                f"  {g.group:<16} no owner (no member claimed partition {s.partition} "
                f"in the last {s.max_age_s:.1f} s)"
            )
            continue
        for i, o in enumerate(g.owners):
            held = s.at_wall - o.since_wall
            since = (
                f"since {_clock(o.since_wall)} ({held:.1f} s)"
                if o.since_exact
                else f"since before {_clock(o.since_wall)} (>= {held:.1f} s)"
            )
            label = g.group if i == 0 else ""
            lines.append(
                f"  {label:<16} {o.member:<24} {since:<40} last heartbeat {o.age_s:.2f} s ago"
            )
        lines.append(f"  {'':<16} stale by at most {g.stale_by_s:.2f} s")
        if len(g.owners) > 1:
            lines.append(f"  {'':<16} (several owners: the overlap non-exclusive NELI allows)")
    lines += [
        f"staleness: an owner named may have stopped leading up to its last heartbeat's age + "
        f"e ({s.clock_skew_s:.1f} s) ago,",
        f"  never more than {s.max_age_s + s.clock_skew_s:.1f} s; a new owner takes about one "
        f"pulse ({s.new_owner_delay_s:.1f} s) plus delivery to show.",
        f"'since before': it already led when this {s.window_s:.1f} s read began "
        "(a longer --window sees further back).",
    ]
    return "\n".join(lines)
