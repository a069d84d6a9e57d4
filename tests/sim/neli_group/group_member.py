"""One member process of the group simulation: its clocks, and the NELI runtime's loops driving
its real :class:`neli._tracker.LeadershipTracker`.

A :class:`MemberProcess` feeds its tracker the way ``neli._runtime`` does, in order, once per
step: the watchdog tick; the coordinator's responses and assignments (the poll thread's
rebalance callbacks); the client's session timer and group heartbeats; the heartbeats it
consumes from the NELI topic; the auto-commit; the pulse; the evaluation. Its clocks:

* the wall clock is off true time by a fixed offset of at most e/2 (so any two members' differ
  by at most e), moved by ``wall_step`` events;
* the monotonic clock runs at true rate from an arbitrary origin, except that it stands still
  during a frozen pause.

The world it acts on (true time, the coordinator, the NELI topic, the faults) is its
:class:`tests.sim.neli_group.groupsim.Simulation`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from neli import Mode, Variant
from neli.wire import Heartbeat

if TYPE_CHECKING:
    from tests.sim.neli_group.group_coordinator import Message
    from tests.sim.neli_group.groupsim import Simulation

WALL_EPOCH = 1_700_000_000.0
#: The NELI consumer's auto-commit interval (``auto.commit.interval.ms``).
_COMMIT_MS = 1000
MONO_BASE = 1000.0


@dataclass
class Record:
    """A heartbeat in the NELI topic: when it reaches the log (true ms), and its CreateTime."""

    append_at: int
    hb: Heartbeat
    publish_wall: float


class MemberProcess:
    """One process of a member slot (a restart makes a new one)."""

    def __init__(self, sim: Simulation, slot: int, incarnation: int, now: int) -> None:
        """Start the process at true time ``now``; its delays and clock offsets are drawn from
        the simulation's generator."""
        sc = sim.scenario
        self.sim = sim
        self.slot = slot
        self.member_id = f"m{slot}/{incarnation}"
        self.config = sc.config(f"m{slot}")
        self.tracker = sim.tracker_factory(self.config, self.member_id)
        self.tracker.verify_own = True  # as the runtime's: only heartbeats it sent count
        self.alive = True
        self.leaving_until: int | None = None  # non-exclusive hand-over after a clean leave
        self.paused_until = -1
        self.frozen_from: int | None = None
        self.mono_lag = 0  # ms the monotonic clock lost to frozen pauses
        self.mono_off = sim.rng.randint(0, 10_000)
        self.wall_off = sim.rng.randint(-sc.skew_ms // 2, sc.skew_ms // 2)
        self.fetch_delay = sim.rng.randint(0, sc.fetch_delay_ms)
        self.assignment: set[int] = set()  # the consumer's (what it fetches)
        self.positions: dict[int, int] = {}
        #: Fast exclusive: per partition, the index of the latest own heartbeat read (the
        #: offset the runtime stores for the auto-commit).
        self.stored: dict[int, int] = {}
        self.in_group = False  # the coordinator answered our join
        self.joining = False
        self.epoch = 0  # counts our (re)joins as a new member
        self.last_ok_mono = self.mono_ms(now)
        self.lost_lag = sim.rng.randint(0, sc.lost_lag_ms)
        self.next_hb = self.mono_ms(now)
        self.next_pulse = self.mono_ms(now)
        self.next_commit = self.mono_ms(now) + _COMMIT_MS
        self.inbox: list[Message] = []
        self.counter = 0
        self.tracker.tick(self.mono(now))

    # -- clocks ---------------------------------------------------------------------------------

    def mono_ms(self, now: int) -> int:
        """The monotonic clock at true time ``now``, in ms."""
        frozen = 0 if self.frozen_from is None else now - self.frozen_from
        return now + self.mono_off - self.mono_lag - frozen

    def mono(self, now: int) -> float:
        """The monotonic clock at true time ``now``, in seconds (as ``time.monotonic()``)."""
        return MONO_BASE + self.mono_ms(now) / 1000

    def wall(self, now: int) -> float:
        """The wall clock at true time ``now`` (as ``time.time()``)."""
        return WALL_EPOCH + (now + self.wall_off) / 1000

    def running(self, now: int) -> bool:
        """Alive and not paused."""
        return self.alive and now >= self.paused_until

    def leads(self, p: int, now: int) -> bool:
        """The tracker's answer, asked at true time ``now``."""
        return self.tracker.leads(p, self.mono(now), self.wall(now))

    # -- group membership (the client's side of the classic protocol) --------------------------

    def join(self) -> None:
        """Join the group as a new member."""
        self.joining = True
        self.epoch += 1
        self.sim.send("c:join", self.member_id, (self.epoch, set()))

    def rejoin(self) -> None:
        """Rejoin a rebalance in progress, naming the partitions kept."""
        self.joining = True
        self.last_ok_mono = self.mono_ms(self.sim.now)  # a join restarts the client's session timer
        self.sim.send("c:rejoin", self.member_id, (self.epoch, set(self.assignment)))

    def lose_session(self, reason: str) -> None:
        """The session is lost: revoke everything (lost), then join again."""
        sim = self.sim
        exclusive = sim.scenario.mode is Mode.EXCLUSIVE
        self.tracker.revoke(sorted(self.assignment), reason, release=not exclusive, lost=True)
        self.assignment.clear()
        self.stored.clear()
        self.in_group = False
        self.last_ok_mono = self.mono_ms(sim.now)
        self.lost_lag = sim.rng.randint(0, sim.scenario.lost_lag_ms)
        self.join()

    def leave(self) -> None:
        """``Neli.close()``: non-exclusive hands over (release, lead until stale), then leaves."""
        sim = self.sim
        exclusive = sim.scenario.mode is Mode.EXCLUSIVE
        self.tracker.revoke(sorted(self.assignment), "closed", release=not exclusive)
        self.assignment.clear()
        self.stored.clear()
        if self.in_group:
            sim.send("c:leave", self.member_id)
        self.in_group = self.joining = False
        if exclusive:
            self.alive = False
        else:
            self.leaving_until = sim.now + sim.scenario.threshold_ms + 1000

    # -- one step (the runtime's loops) ---------------------------------------------------------

    def step(self) -> None:  # noqa: PLR0912 - the runtime's loops, in order
        """One step of a running member, at the simulation's true time."""
        sim = self.sim
        sc, now = sim.scenario, sim.now
        if self.frozen_from is not None:  # the pause is over: the clock resumes where it stopped
            self.mono_lag += now - self.frozen_from
            self.frozen_from = None
        mono = self.mono(now)
        tracker = self.tracker
        tracker.tick(mono, self.wall(now) if sc.wall_stall_guard else None)
        # Coordinator responses and assignments (the poll thread's rebalance callbacks).
        while self.inbox and self.inbox[0].at <= now and not sim.is_cut("cut_coord", self.slot):
            self._handle(self.inbox.pop(0))
            if not self.alive:
                return
        mono_ms = self.mono_ms(now)
        if self.leaving_until is not None:
            if now >= self.leaving_until or not tracker.led_or_assigned():
                self.alive = False
                return
        else:
            if self.in_group and mono_ms - self.last_ok_mono >= sc.session_ms + self.lost_lag:
                self.lose_session("session lost")
            if mono_ms >= self.next_hb:
                self.next_hb = mono_ms + sc.hb_ms
                if self.in_group or self.joining:
                    sim.send("c:hb", self.member_id, self.epoch)
        # Consumed heartbeats.
        if not sim.is_cut("cut_fetch", self.slot):
            for p in sorted(self.assignment):
                log, pos = sim.log[p], self.positions.get(p, 0)
                while pos < len(log) and log[pos].append_at + self.fetch_delay <= now:
                    rec = log[pos]
                    tracker.observe(p, rec.hb, rec.publish_wall, mono)
                    if sim.store_own and rec.hb.member_id == self.member_id:
                        self.stored[p] = pos
                    pos += 1
                self.positions[p] = pos
        if mono_ms >= self.next_commit:
            self.next_commit = mono_ms + _COMMIT_MS
            self._commit()
        # The pulse task.
        if mono_ms >= self.next_pulse:
            self.next_pulse = mono_ms + sc.pulse_ms
            self._pulse()
        # The poll returns: callbacks queued before this step began have run (a disproved
        # take-over ends; a true one was revoked above, by the coordinator or the session check).
        tracker.polled(mono)
        tracker.evaluate(mono, self.wall(now))

    def _commit(self) -> None:
        """Auto-commit: accepted only from the member the coordinator assigns the partition
        to, outside a rebalance, over a working coordinator link."""
        sim = self.sim
        coord = sim.coord
        if (
            sim.now < sim.stalled_until
            or sim.is_cut("cut_coord", self.slot)
            or coord.rebalancing
            or not self.running(sim.now)
        ):
            return
        for p in self.assignment:
            if coord.owner.get(p) != self.member_id:
                continue
            if not sim.store_own:
                sim.committed[p] = self.positions.get(p, 0)
            elif p in self.stored:  # nothing stored yet: nothing committed
                sim.committed[p] = self.stored[p]

    def _pulse(self) -> None:
        sim = self.sim
        now, tracker = sim.now, self.tracker
        mono, wall = self.mono(now), self.wall(now)
        led = tuple(sorted(tracker.led(mono, wall)))
        targets: list[tuple[int, int, float | None]]
        if sim.scenario.variant is Variant.FULL:
            targets = [(p, 0, None) for p in range(sim.scenario.partitions)]
        else:
            targets = [
                (p, tracker.incarnation(p) or 0, tracker.since(p))
                for p in sorted(tracker.assigned())
            ]
        if sim.scenario.variant is Variant.FAST:  # announced before sending, as the runtime does
            for i, (p, _, _) in enumerate(targets):
                tracker.sent(p, self.counter + 1 + i, mono)
        if sim.is_cut("cut_produce", self.slot):
            self.counter += len(targets)
            return
        for p, inc, since in targets:
            self.counter += 1
            hb = Heartbeat(
                group="sim",
                member_id=self.member_id,
                member_name=f"m{self.slot}",
                incarnation=inc,
                counter=self.counter,
                sent_mono=mono,
                sent_wall=wall,
                led=led,
                since=since,
            )
            at = now + sim.rng.randint(1, sim.scenario.produce_delay_ms)
            # CreateTime has ms resolution.
            sim.append(p, Record(at, hb, int(wall * 1000) / 1000))

    def _handle(self, msg: Message) -> None:
        """A coordinator response or assignment (the poll thread's rebalance callbacks)."""
        sim = self.sim
        exclusive = sim.scenario.mode is Mode.EXCLUSIVE
        mono = self.mono(sim.now)
        if msg.kind == "hb_ok":
            self.last_ok_mono = self.mono_ms(sim.now)
            if msg.data and (self.in_group or self.joining):  # a rebalance is in progress: rejoin
                if not sim.scenario.cooperative:
                    self.tracker.revoke(sorted(self.assignment), "rebalance", release=not exclusive)
                    self.assignment.clear()
                    self.stored.clear()
                self.rejoin()
        elif msg.kind == "unknown":  # the coordinator expired us meanwhile
            if msg.data == self.epoch:  # (answers to heartbeats sent before we rejoined: ignored)
                self.lose_session("unknown member")
        elif msg.kind == "assign":
            epoch, given = cast("tuple[int, set[int]]", msg.data)
            if self.leaving_until is not None or epoch != self.epoch:
                return  # the answer to a join from before a session loss: librdkafka drops it
            self.joining = False
            self.in_group = True
            new: set[int] = set(given)
            gone = self.assignment - new
            if gone:
                self.tracker.revoke(sorted(gone), "rebalance", release=not exclusive)
                for p in gone:
                    self.stored.pop(p, None)
            added = new - self.assignment
            for p in added:  # from the committed position, else the end of the log as it is now
                log = sim.log[p]
                pos = len(log)
                while pos > 0 and log[pos - 1].append_at > sim.now:
                    pos -= 1
                committed = sim.committed[p]
                self.positions[p] = pos if committed is None else min(committed, pos)
            self.assignment = new
            # librdkafka passes the incremental set; the tracker ignores partitions it already
            # holds, so the full set is equivalent.
            self.tracker.assign(sorted(new), mono, self.wall(sim.now))
            if gone and sim.scenario.cooperative:
                self.rejoin()
