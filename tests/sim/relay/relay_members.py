"""The relay simulation's processes: crashes, pauses, cut-offs, restarts, and NELI heartbeats.

With the takeover detector on (:mod:`pricing_ha.dedupe.detector`), a member sees an owner stop
from the relay group's NELI heartbeats and from ``prices`` itself, long before the group does.
:class:`Members` gives the simulated world what that needs:

* **heartbeats**: every member that is up sends one every ``pulse_interval_ms`` naming the
  partitions it leads as NELI says (:meth:`World.leads`), and each lands in every member's
  :class:`~pricing_ha.dedupe.liveness.Liveness` (its own included) 2-60 ms later, at that
  simulated receive time. A member that is down (crashed, paused, cut off) sends none, and
  receives none until it is up again: a paused or cut-off receiver gets what was sent
  meanwhile at its resumption, stamped then (its reader only reads then). Pulses missed while
  time jumped (a step ``advance``, a producer's ``flush``) are sent at their own instants.
* **faults of a whole process**: a crash (no turns, no reads, no heartbeats, its unacknowledged
  output lost; the group notices S later and moves its partitions), a pause (the same until it
  resumes; past S the group moves its partitions and it is a zombie when it wakes, held off by
  NELI's stall guard when it slept longer than T), a cut-off (it runs, but its output fails,
  its tail and its heartbeats stop both ways; past T its NELI fences itself, past S the group
  moves its partitions), and a restart of a crashed member as a new process (a join, with an
  empty standby tail that reads ``prices`` from its start).
* what the checks count: takeovers on suspicion, and the *wrong* ones (the partition's holder,
  as the group or a zombie has it, was alive: up or paused, not crashed).

The relay's worker is given a stand-in for its liveness reader (:class:`SimLivenessReader`):
the heartbeats are fed by the world, not by a thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neli.wire import Heartbeat
from pricing_ha.dedupe.liveness import Liveness

if TYPE_CHECKING:
    from tests.sim.relay.relay_world import World

GROUP = "relay"
_NEVER_UP = float("inf")
_CATCH_UP_PULSES_S = 5.0  # after a long jump, pulses older than this are not replayed


class SimLivenessReader:
    """The relay worker's liveness reader, fed by the simulated world instead of a thread."""

    def __init__(self, liveness: Liveness) -> None:
        """Wrap the member's :class:`Liveness`."""
        self.liveness = liveness

    def start(self) -> None:
        """Nothing to start: :class:`Members` delivers the heartbeats."""

    def close(self) -> None:
        """Nothing to close."""

    def problem(self) -> str | None:
        """Never down: the simulated world delivers every heartbeat."""
        return None


@dataclass
class Down:
    """A member not fully up: crashed, paused or cut off, from ``since`` until ``until``."""

    kind: str  # "crashed" | "paused" | "cut"
    since: float
    until: float = _NEVER_UP
    noticed: bool = False  # the group has moved its partitions (S after ``since``)


@dataclass
class Members:
    """The processes behind the relay members (see the module docstring)."""

    world: World
    pulse_s: float
    session_s: float
    incarnation: dict[str, int] = field(default_factory=dict)
    down: dict[str, Down] = field(default_factory=dict)
    livenesses: dict[str, Liveness] = field(default_factory=dict)
    next_pulse: dict[str, float] = field(default_factory=dict)
    counter: int = 0
    # (due, receiver, heartbeat): sent, not yet received
    wire: list[tuple[float, str, Heartbeat]] = field(default_factory=list)
    # (due, kind, member, arg): the group's and NELI's reactions to a fault, in time order
    events: list[tuple[float, str, str, float]] = field(default_factory=list)
    suspicions: int = 0
    wrong_suspicions: int = 0
    cfg: Any = None  # the members' AppConfig, and the seed: to start a member again
    seed: int = 0

    def member_id(self, name: str) -> str:
        """NELI's member id of ``name``'s current process (a restart is a new id)."""
        return f"{name}#{self.incarnation.get(name, 0)}"

    def liveness_for(self, name: str, within_s: float) -> Liveness:
        """A fresh :class:`Liveness` for the current process of ``name``."""
        liveness = Liveness(GROUP, self.member_id(name), within_s)
        self.livenesses[name] = liveness
        self.next_pulse[name] = self.world.clock.now
        return liveness

    # -- states -------------------------------------------------------------------------------

    def _down_at(self, name: str, at: float, kinds: tuple[str, ...]) -> bool:
        d = self.down.get(name)
        return d is not None and d.kind in kinds and d.since <= at < d.until

    def runs(self, name: str) -> bool:
        """Whether ``name``'s process runs now (not crashed, not paused)."""
        return not self._down_at(name, self.world.clock.now, ("crashed", "paused"))

    def alive(self, name: str) -> bool:
        """Whether ``name``'s process exists (up, paused or cut off: not crashed)."""
        d = self.down.get(name)
        return d is None or d.kind != "crashed"

    def assignable(self, name: str) -> bool:
        """Whether the group may give ``name`` a partition (not seen gone by it)."""
        d = self.down.get(name)
        return d is None or not d.noticed

    def crash(self, name: str) -> None:
        """``name`` dies: nothing more from it; the group notices S later."""
        if not self.alive(name):
            return
        now = self.world.clock.now
        self.down[name] = Down("crashed", now)
        w = self.world
        for key in [k for k in w.zombies if k[0] == name]:
            del w.zombies[key]  # a dead process writes nothing
        self.events.append((now + self.session_s, "notice", name, 0.0))
        w.note(f"{name} CRASHES")

    def pause(self, name: str, seconds: float) -> None:
        """``name`` stops (SIGSTOP) for ``seconds``; past S the group moves its partitions."""
        if name in self.down:
            return
        now = self.world.clock.now
        self.down[name] = Down("paused", now, now + seconds)
        self.events.append((now + seconds, "wake", name, seconds))
        if seconds > self.session_s:
            self.events.append((now + self.session_s, "notice", name, seconds - self.session_s))
        self.world.note(f"{name} PAUSED for {seconds}")

    def cut(self, name: str, seconds: float) -> None:
        """``name`` is cut off from the broker for ``seconds`` (it keeps running)."""
        if name in self.down:
            return
        w = self.world
        now = w.clock.now
        self.down[name] = Down("cut", now, now + seconds)
        faults = w.faults[name]
        for attr in ("slow_until", "fail_until", "silent_until"):
            setattr(faults, attr, max(getattr(faults, attr), now + seconds))
        self.events.append((now + seconds, "heal", name, seconds))
        if seconds > w.threshold_s:  # its own heartbeats do not come back: NELI fences it
            self.events.append((now + w.threshold_s, "fence", name, 0.0))
        if seconds > self.session_s:
            self.events.append((now + self.session_s, "notice", name, 0.0))
        w.note(f"{name} CUT OFF for {seconds}")

    def restart(self, name: str) -> bool:
        """A crashed member the group has noticed starts again, as a new process."""
        d = self.down.get(name)
        if d is None or d.kind != "crashed" or not d.noticed:
            return False
        del self.down[name]
        self.incarnation[name] = self.incarnation.get(name, 0) + 1
        self.world.note(f"{name} RESTARTS as {self.member_id(name)}")
        return True

    # -- time ---------------------------------------------------------------------------------

    def tick(self) -> None:
        """Heartbeats sent and received up to now, then the group's and NELI's reactions that
        are due (heartbeats first: a member woken or healed since its last tick sent nothing
        while it was down, and reads what it missed at its wake-up, by its down record)."""
        now = self.world.clock.now
        self.heartbeats(now)
        due = sorted(e for e in self.events if e[0] <= now)
        for event in due:
            self.events.remove(event)
            self._react(*event)

    def heartbeats(self, now: float) -> None:
        """Send the pulses due up to ``now``, deliver the heartbeats that have arrived."""
        self._pulse(now)
        self._receive(now)

    def _react(self, at: float, kind: str, name: str, arg: float) -> None:
        w = self.world
        owned = [p for p, o in sorted(w.owner.items()) if o == name]
        if kind == "notice":
            d = self.down.get(name)
            if d is not None:
                d.noticed = True
            others = [m for m in w.workers if m != name and self.alive(m)]
            w.note(f"group: {name}'s session expired")
            for p in owned:
                target = others[p % len(others)] if others else None
                # A paused member is a zombie when it wakes (until its own fence).
                zombie = arg + 0.05 if arg > 0 else 0.0
                w.move(p, target, planned=False, zombie_s=zombie)
        elif kind == "wake":
            if self.down.get(name) is None or self.down[name].kind != "paused":
                return  # killed while paused
            del self.down[name]
            if arg > w.threshold_s:  # its watchdog finds its heartbeats T late: held off
                w.stalled_until[name] = max(
                    w.stalled_until.get(name, 0.0), at + self.session_s + 0.5
                )
            w.note(f"{name} WAKES after {arg}")
        elif kind == "fence":
            if not self.alive(name):
                return
            for p in owned:
                w.fence(name, p)
        elif kind == "heal":
            if self.down.get(name) is None or self.down[name].kind != "cut":
                return  # killed while cut off
            del self.down[name]
            for p in owned:
                w.resume(name, p)
            w.note(f"{name} HEALED after {arg}")

    def _pulse(self, now: float) -> None:
        w = self.world
        for name in w.workers:
            at = max(self.next_pulse.get(name, now), now - _CATCH_UP_PULSES_S)
            while at <= now:
                if not self._down_at(name, at, ("crashed", "paused", "cut")):
                    self.counter += 1
                    led = tuple(p for p in range(w.partitions) if w.leads(name, p))
                    hb = Heartbeat(
                        group=GROUP,
                        member_id=self.member_id(name),
                        member_name=name,
                        incarnation=0,
                        counter=self.counter,
                        sent_mono=at,
                        sent_wall=at,
                        led=led,
                    )
                    for receiver in w.workers:
                        self.wire.append((at + w.rng.uniform(0.002, 0.06), receiver, hb))
                at += self.pulse_s
            self.next_pulse[name] = at

    def _receive(self, now: float) -> None:
        kept = []
        for due, receiver, hb in sorted(self.wire, key=lambda i: i[0]):
            if due > now:
                kept.append((due, receiver, hb))
                continue
            d = self.down.get(receiver)
            if d is not None and d.kind == "crashed":
                continue  # a dead process receives nothing; a restarted one reads from the end
            received = due
            if d is not None and d.since <= due < d.until:
                if d.until > now:
                    kept.append((due, receiver, hb))  # read once it is up again
                    continue
                received = d.until
            liveness = self.livenesses.get(receiver)
            if liveness is not None:
                liveness.observe(hb, received)
        self.wire = kept

    def heal_all(self) -> list[str]:
        """End every fault (the final drain); returns the crashed members, to restart."""
        now = self.world.clock.now
        crashed = []
        for name, d in list(self.down.items()):
            if d.kind == "crashed":
                d.noticed = True
                crashed.append(name)
            else:
                d.until = min(d.until, now)
        self.events = [(min(e[0], now), *e[1:]) for e in self.events]
        self.tick()
        return crashed

    # -- what the checks count ----------------------------------------------------------------

    def suspected(self, name: str, partitions: list[int]) -> None:
        """Member ``name`` takes ``partitions`` over on suspicion: count the wrong ones."""
        w = self.world
        for p in partitions:
            self.suspicions += 1
            # Who holds it: the group's owner, a zombie, a member still handing it over.
            holders = {m for m, q in w.zombies if q == p}
            holders |= {m for m, wk in w.workers.items() if p in wk.active or p in wk.wanted}
            owner = w.owner.get(p)
            if owner is not None:
                holders.add(owner)
            holders.discard(name)
            wrong = any(self.alive(h) for h in holders)
            self.wrong_suspicions += wrong
            w.note(f"{name} SUSPECTS {p} (holders {sorted(holders)}, wrong={wrong})")
