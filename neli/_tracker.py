"""Where leadership is decided: the pure state of one member, driven by an injected clock.

This module does no I/O. The runtime feeds it assignments, revocations and the heartbeats it
consumes, and asks it, *at the moment of every query*, whether the member leads a partition.
Leadership is never a cached flag: a process that was frozen and wakes up asks with the current
time and gets the current answer.

When can leadership no longer be trusted?

* **Full NELI, non-exclusive**: once no heartbeat (from anyone) has been received on the
  partition for T, measured by this process's monotonic clock. A revoked partition is not
  dropped at once: it stays led until it goes stale, so that a partition in the middle of a
  rebalance keeps a leader (*at least one*), exactly as in the paper.
* **Full NELI, exclusive**: once the newest heartbeat on the partition was *published* more than
  T ago, by its publish timestamp against our wall clock (so records that sat in a fetch buffer
  while we were frozen do not count as new), and during the grace period T after a new
  assignment.
* **Fast NELI**: once the member's *own* heartbeat for the current incarnation has not come back
  within T of being sent, measured on our monotonic clock from the send time. In exclusive mode
  a new assignment also waits a grace period T (goNELI does not): a previous owner that lost the
  group coordinator but not the partition's broker still sees its own heartbeats return until
  its client declares the session lost, which happens about S after its last group heartbeat,
  the same moment the coordinator reassigns the partition.
* **Fast NELI, exclusive: a term taken over ends, and a grace period can end on evidence.**
  Each heartbeat carries ``since``, the wall time its sender was assigned the partition it is
  written to. A member that reads, on a partition it holds, a heartbeat of another member of
  its group whose term there began later (``since`` greater than its own) has been replaced:
  it stops leading that partition at once (the successor's heartbeat precedes any of its own
  later ones on the log, so those can no longer keep it leading). The successor, in turn, may
  lead before its grace period is over once (1) its own heartbeat of the new term has come
  back, so it has read the partition up to that heartbeat, and (2) the latest heartbeat of
  another member it read there before that (from the position the group committed, where the
  previous holder's reading stopped) named the partition as led and was sent more than T + e
  ago. The previous holder leads only on its own heartbeats, sent less than T ago and returned:
  those landing before ours are the ones read (a member's heartbeats land in the order sent,
  one request in flight), and those landing after ours return to it only after ours, which ends
  its term. The position a fast exclusive member commits is that *of* its own latest heartbeat
  read (not the next one), so its heartbeats from that one on all lie in what the successor
  reads, and its earlier ones were sent before it: the latest read is the latest it sent that
  landed before ours. (Reading from further back changes nothing: the window only has to reach
  the committer's last heartbeat.) Without any heartbeat of another member there (nobody
  committed, or the committer never wrote one), the evidence is missing and the grace period
  runs in full. After a crash the previous holder's last heartbeat is about S plus the
  rebalance old when the successor is assigned, so the grace period ends as soon as its own
  heartbeat returns. This assumes every member of the group runs a version that stops on a
  later term.
* **Fast NELI, exclusive: a take-over the group disproves ends.** Heartbeats are not
  authenticated: a take-over may be forged. A true one means the coordinator ended this
  member's session before the heartbeat was read, and its client declares the loss (REVOKED,
  at the next poll) at most about S after its last successful group heartbeat. A partition
  still held at a poll begun ``2 S + 1 s`` after the take-over was read was never taken: it is
  led again. A blocked poll thread completes no poll, so resumes nothing (docs/neli-trust.md).
* **Non-exclusive, riding through isolation** (``keep_leading_when_isolated``): a member that
  was leading a partition keeps leading it, *provisionally*, through a broker or coordinator
  stall or a session loss; when that ends: :mod:`neli._isolation`.
* **Exclusive mode, both variants**: also whenever this process has stalled (was paused, or
  its event loop was starved) for longer than ``stall_limit_ms``, until S + 0.5 s (at least T)
  after it runs again. Why, and how a stall is detected: :mod:`neli._stall`.

Parts live in modules of their own: the stall guard (:mod:`neli._stall`), what the other
members of the group claim to lead, read from their heartbeats (:mod:`neli._claims`), the
rules of riding through isolation (:mod:`neli._isolation`) and the per-partition state
(:mod:`neli._slot`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from neli._claims import Claims
from neli._config import Mode, NeliConfig, Variant
from neli._events import EventKind
from neli._heartbeat import Heartbeat
from neli._isolation import Isolation
from neli._slot import Slot, State, observe_other, previous_holder_silence
from neli._stall import StallGuard


@dataclass(frozen=True, slots=True)
class Transition:
    """A leadership transition decided by the tracker."""

    kind: EventKind
    partition: int
    reason: str
    term_started_wall: float | None = None
    predecessor: Heartbeat | None = None


class LeadershipTracker:
    """Leadership state of one member (not thread-safe; the runtime serialises access)."""

    def __init__(self, config: NeliConfig, member_id: str) -> None:
        """Create a tracker for ``member_id`` with ``config``'s timing."""
        assert config.threshold_ms is not None
        self._config = config
        self._member_id = member_id
        self._t = config.threshold_ms / 1000.0
        self._e = config.clock_skew_ms / 1000.0
        self._exclusive = config.mode is Mode.EXCLUSIVE
        self._fast = config.variant is Variant.FAST
        self._slots: dict[int, Slot] = {}
        self._incarnations = 0
        self._stall = StallGuard(config)
        self._claims = Claims(self._t)
        self._isolation = Isolation(
            config.keep_leading_when_isolated and not self._exclusive, self._t, self._claims
        )
        #: Fast variant: count only own heartbeats announced with :meth:`sent` (the runtime
        #: sets it; tests of the rules may feed heartbeats without announcing them).
        self.verify_own = False
        #: A take-over the member is still assigned this long after reading it is disproved.
        self.disprove_after_s = 2 * config.session_timeout_ms / 1000 + 1.0

    # -- inputs -------------------------------------------------------------------------------

    def tick(self, now_mono: float, now_wall: float | None = None) -> None:
        """Watchdog tick, called often (every ``check_interval_ms``) by the runtime: see
        :meth:`neli._stall.StallGuard.tick`."""
        self._stall.tick(now_mono, now_wall)

    def assign(
        self, partitions: Iterable[int], now_mono: float, now_wall: float | None = None
    ) -> None:
        """The group assigned ``partitions`` to this member (incrementally), at ``now_wall``
        (sent as the term's ``since`` in fast-variant heartbeats)."""
        given = set(partitions)
        for p, held in self._slots.items():
            if held.hold and p not in given:
                # A new assignment ends provisional leadership: the group works again and p
                # went to another member in this rebalance. Hand over as soon as that member
                # is seen leading p (its heartbeats name p, on any partition this member now
                # reads), and at the latest T from now: no gap in between, and no long overlap.
                held.hold, held.fresh, held.hand_over_after = False, now_mono, now_mono
        for p in sorted(given):
            slot = self._slots.get(p)
            if slot is not None and slot.released is not None:
                slot.released, slot.hold = None, False  # given back: the term goes on
                slot.hand_over_after = None
            elif slot is None:
                self._incarnations += 1
                self._slots[p] = Slot(
                    assigned_mono=now_mono, incarnation=self._incarnations, since_wall=now_wall
                )

    def end_grace(self, partition: int, now_mono: float) -> bool:
        """End the exclusive grace period of an assigned, not yet led ``partition`` now.

        For a caller that has *proof* that no earlier holder can still act on the partition
        (see :meth:`neli.takeover.Takeover.end_grace`). Returns whether a grace period was cut
        short.
        """
        slot = self._slots.get(partition)
        if (
            not self._exclusive
            or slot is None
            or slot.released is not None
            or slot.state is not State.FOLLOWER
            or now_mono - slot.assigned_mono >= self._t
        ):
            return False
        slot.assigned_mono = now_mono - self._t
        return True

    def in_grace(self, now_mono: float, now_wall: float | None = None) -> frozenset[int]:
        """Exclusive mode: assigned partitions still in their grace period, not yet led."""
        if not self._exclusive:
            return frozenset()
        return frozenset(
            p
            for p, slot in self._slots.items()
            if slot.released is None
            and slot.state is State.FOLLOWER
            and self._in_grace(slot, now_mono, now_wall)
        )

    def _in_grace(self, slot: Slot, now_mono: float, now_wall: float | None) -> bool:
        """Whether ``slot``'s grace period still runs (exclusive mode)."""
        if now_mono - slot.assigned_mono >= self._t:
            return False
        # Fast variant: over early on the evidence of the module docstring.
        silent = (
            None if now_wall is None or not self._fast else previous_holder_silence(slot, now_wall)
        )
        return silent is None or silent < self._t + self._e

    def revoke(
        self, partitions: Iterable[int], reason: str, *, release: bool = False, lost: bool = False
    ) -> list[Transition]:
        """The group took ``partitions`` away; returns REVOKED for those that were led/fenced.

        Args:
            partitions: the partitions taken away.
            reason: why, for the events.
            release: in non-exclusive mode, keep leading each partition until its observations
                go stale (the REVOKED transition then comes from :meth:`evaluate`). Ignored in
                exclusive mode, where revocation ends leadership at once.
            lost: the session was lost (not a planned rebalance). With
                ``keep_leading_when_isolated``, released partitions that were led are then held
                provisionally until a new assignment arrives (see the module docstring).
        """
        out: list[Transition] = []
        for p in partitions:
            kept = self._slots.get(p)
            if release and not self._exclusive and kept is not None:
                kept.released = reason
                kept.hold = self._isolation.enabled and lost and kept.state is State.LEADER
                continue
            slot = self._slots.pop(p, None)
            if slot is not None and slot.state is not State.FOLLOWER:
                out.append(
                    Transition(
                        EventKind.REVOKED, p, reason, term_started_wall=slot.term_started_wall
                    )
                )
        return out

    def observe(
        self, partition: int, hb: Heartbeat, publish_wall: float | None, now_mono: float
    ) -> str | None:
        """Record a heartbeat consumed from ``partition``.

        Args:
            partition: where it was consumed.
            hb: the decoded heartbeat.
            publish_wall: the record's timestamp in seconds (CreateTime or LogAppendTime), if any.
            now_mono: the monotonic time of receipt.

        Returns:
            ``None``, or why a heartbeat in this member's name is refused as not sent by it
            (it would keep a lost partition fresh).
        """
        if hb.member_id == self._member_id and hb.sent_mono > now_mono:
            return "own from the future"
        self._isolation.heard(now_mono)
        if hb.member_id != self._member_id and hb.group == self._config.group_id:
            # Other groups share the topic; their leaders are not our predecessors.
            self._claims.observe(hb, now_mono)
        slot = self._slots.get(partition)
        if slot is None:
            return None
        if self._fast:
            if hb.member_id != self._member_id:
                if self._exclusive and hb.group == self._config.group_id:
                    observe_other(partition, slot, hb, publish_wall, now_mono)
                return None
            if hb.incarnation != slot.incarnation:
                return None  # only our own heartbeats of this term prove we still own it
            if self.verify_own and not slot.sent_it(hb):
                return None if slot.forgot(hb) else "own, never sent"
            value = hb.sent_mono
        elif self._exclusive:
            value = publish_wall if publish_wall is not None else hb.sent_wall
        else:
            value = now_mono
        if slot.fresh is None or value > slot.fresh:
            slot.fresh = value
        return None

    def sent(self, partition: int, counter: int, sent_mono: float) -> None:
        """Fast variant: this member sends heartbeat ``counter`` to ``partition`` at
        ``sent_mono``. With :attr:`verify_own` only such heartbeats refresh it: a forgery in
        this member's name (copied from its earlier ones) cannot keep a lost partition fresh."""
        slot = self._slots.get(partition)
        if slot is not None:
            slot.remember_sent(counter, sent_mono, self._t)

    def polled(self, started_mono: float) -> list[tuple[int, str]]:
        """The poll thread finished a poll that began at ``started_mono``: every rebalance
        callback librdkafka had queued by then has run.

        Ends each take-over (fast, exclusive) that the group has disproved: read at least
        :attr:`disprove_after_s` before that poll began, on a partition this member still
        holds (see the module docstring). Returns them as ``(partition, claimant)``.
        """
        out: list[tuple[int, str]] = []
        for p, slot in self._slots.items():
            if (
                slot.superseded is not None
                and slot.superseded_mono is not None
                and started_mono - slot.superseded_mono >= self.disprove_after_s
            ):
                out.append((p, slot.superseded))
                slot.superseded = slot.superseded_mono = None
        return out

    # -- queries ------------------------------------------------------------------------------

    def previous_holder_silent(self, partition: int, now_wall: float) -> float | None:
        """Fast, exclusive: how long ago (wall clock) the previous holder of an assigned
        ``partition`` sent its last heartbeat, by the evidence of the module docstring: read on
        the partition before this member's own first heartbeat returned, naming the partition
        as led. ``None`` while that is not known (no such heartbeat, or ours not back yet)."""
        slot = self._slots.get(partition)
        return None if slot is None else previous_holder_silence(slot, now_wall)

    def since(self, partition: int) -> float | None:
        """Wall time at which ``partition`` was assigned (fast-variant heartbeats)."""
        slot = self._slots.get(partition)
        return None if slot is None else slot.since_wall

    def incarnation(self, partition: int) -> int | None:
        """The current incarnation for an assigned partition (fast-variant heartbeats)."""
        slot = self._slots.get(partition)
        return None if slot is None else slot.incarnation

    def assigned(self) -> frozenset[int]:
        """Partitions currently assigned to this member."""
        return frozenset(p for p, slot in self._slots.items() if slot.released is None)

    def led_or_assigned(self) -> frozenset[int]:
        """Every partition this member holds a slot for (assigned, or released but fresh)."""
        return frozenset(self._slots)

    def predecessor(self, partition: int) -> Heartbeat | None:
        """The latest heartbeat seen from another member that listed ``partition`` as led."""
        return self._claims.latest(partition)

    def leads(self, partition: int, now_mono: float, now_wall: float) -> bool:
        """Whether this member leads ``partition`` at this instant."""
        return self.why_not(partition, now_mono, now_wall) is None

    def recovering(self, now_mono: float, now_wall: float) -> bool:
        """Exclusive mode: whether a stall holds this member off leading anything now."""
        return self._exclusive and self._stall.reason(now_mono, now_wall) is not None

    @property
    def stalls(self) -> int:
        """How many stalls longer than the limit were detected."""
        return self._stall.stalls

    def why_not(self, partition: int, now_mono: float, now_wall: float) -> str | None:
        """``None`` if this member leads ``partition`` now, else the reason it does not."""
        slot = self._slots.get(partition)
        if slot is None:
            return "not assigned"
        if self._exclusive:
            stall = self._stall.reason(now_mono, now_wall)
            if stall is not None:
                return stall
        if slot.superseded is not None:
            return f"taken over by {slot.superseded}"
        if slot.fresh is None:
            return "no heartbeat yet"
        if self._exclusive and self._in_grace(slot, now_mono, now_wall):
            return "grace period"
        if self._exclusive and self._fast:
            return None if now_mono - slot.fresh < self._t else "own heartbeat not returned"
        if self._exclusive:
            return None if now_wall - slot.fresh < self._t else "heartbeats stale"
        handed_over = self._isolation.handed_over(partition, slot)
        if handed_over is not None:
            return handed_over
        if now_mono - slot.fresh < self._t and not slot.hold:
            return None
        stale = "own heartbeat not returned" if self._fast else "heartbeats stale"
        return self._isolation.why_not(partition, slot, now_mono, stale)

    def provisional(self, now_mono: float, now_wall: float) -> frozenset[int]:
        """Partitions led only provisionally now (stale or session lost; see the docstring)."""
        return frozenset(
            p
            for p, slot in self._slots.items()
            if self._isolation.enabled
            and self.leads(p, now_mono, now_wall)
            and (slot.hold or (slot.fresh is not None and now_mono - slot.fresh >= self._t))
        )

    def led(self, now_mono: float, now_wall: float) -> frozenset[int]:
        """Partitions this member leads at this instant."""
        return frozenset(p for p in self._slots if self.leads(p, now_mono, now_wall))

    def freshness(self, now_mono: float, now_wall: float) -> dict[int, float | None]:
        """Age in seconds of the freshest observation per assigned partition (None: none yet)."""
        out: dict[int, float | None] = {}
        for p, slot in self._slots.items():
            if slot.fresh is None:
                out[p] = None
            elif self._exclusive and not self._fast:
                out[p] = now_wall - slot.fresh
            else:
                out[p] = now_mono - slot.fresh
        return out

    # -- transitions --------------------------------------------------------------------------

    def evaluate(self, now_mono: float, now_wall: float) -> list[Transition]:
        """Compare the current answer with the last one reported and return the transitions."""
        out: list[Transition] = []
        for p, slot in sorted(self._slots.items()):
            reason = self.why_not(p, now_mono, now_wall)
            if slot.released is not None and reason is not None:
                del self._slots[p]
                if slot.state is not State.FOLLOWER:
                    started = slot.term_started_wall
                    kind, why = EventKind.REVOKED, f"{slot.released}, then {reason}"
                    out.append(Transition(kind, p, why, term_started_wall=started))
            elif reason is None and slot.state is State.FOLLOWER:
                slot.state, slot.term_started_wall = State.LEADER, now_wall
                out.append(
                    Transition(EventKind.ACQUIRED, p, "assigned", predecessor=self.predecessor(p))
                )
            elif reason is None and slot.state is State.FENCED:
                slot.state, slot.term_started_wall = State.LEADER, now_wall
                out.append(Transition(EventKind.RESUMED, p, "heartbeats fresh again"))
            elif reason is not None and slot.state is State.LEADER:
                started = slot.term_started_wall
                slot.state, slot.term_started_wall = State.FENCED, None
                out.append(Transition(EventKind.FENCED, p, reason, term_started_wall=started))
        return out
