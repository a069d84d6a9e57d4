"""LeadershipTracker against an independent model, over random histories with fixed seeds.

Each history is a random sequence of assign / revoke (with or without release) / heartbeat /
advance / tick / evaluate. After every step the tracker's answers are compared with a model that
recomputes leadership from the raw inputs (the rules of ``neli._tracker``'s docstring), and the
reported transitions are checked against the transition table of ``neli._events``.
"""

from __future__ import annotations

import collections
import math
import random
from dataclasses import dataclass, field

import pytest

from neli import EventKind, Mode, Variant
from neli._tracker import Transition
from neli.wire import Heartbeat
from tests.unit.neli.neli_tracker_harness import COMBOS, ME, OTHER, Member, T

PARTITIONS = range(4)
#: Long enough for every history to reach every transition: exclusive members (fast ones too)
#: wait T after each assignment, so a RESUMED after a FENCED within one assignment is rare.
STEPS = 3000
SEEDS = [7, 1234, 20240601]

#: Which kinds may follow the last kind reported for a partition (None: nothing reported yet).
ALLOWED_NEXT: dict[EventKind | None, set[EventKind]] = {
    None: {EventKind.ACQUIRED},
    EventKind.ACQUIRED: {EventKind.FENCED, EventKind.REVOKED},
    EventKind.RESUMED: {EventKind.FENCED, EventKind.REVOKED},
    EventKind.FENCED: {EventKind.RESUMED, EventKind.REVOKED},
    EventKind.REVOKED: {EventKind.ACQUIRED},
}


@dataclass
class Model:
    """The inputs so far, and what the tracker should answer given them."""

    member: Member
    assigned: set[int] = field(default_factory=set)
    released: set[int] = field(default_factory=set)
    #: Qualifying observation times per slot, keyed by (partition, incarnation).
    obs: dict[tuple[int, int], list[float]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )
    assigned_at: dict[tuple[int, int], float] = field(default_factory=dict)
    last_tick: float = 0.0
    suspect_until: float = -math.inf
    last_kind: dict[int, EventKind | None] = field(default_factory=dict)
    seen: collections.Counter[EventKind] = field(default_factory=collections.Counter)

    @property
    def exclusive(self) -> bool:
        """Exclusive mode."""
        return self.member.mode is Mode.EXCLUSIVE

    @property
    def full_exclusive(self) -> bool:
        """Full NELI in exclusive mode: publish times and a grace period."""
        return self.exclusive and self.member.variant is Variant.FULL

    def tick(self) -> None:
        """Mirror a watchdog tick."""
        now = self.member.mono
        stall_limit = (self.member.config.stall_limit_ms or 0) / 1000
        if now - self.last_tick > stall_limit:
            # Suspect until the consumer would have noticed a lost session: S + 0.5 s, >= T.
            s = self.member.config.session_timeout_ms / 1000
            self.suspect_until = now + max(T, s + 0.5)
        self.last_tick = now

    def observe(self, partition: int, hb: Heartbeat, publish_wall: float | None) -> None:
        """Record ``hb`` if it proves freshness for the partition's current slot."""
        inc = self.member.tracker.incarnation(partition)
        if inc is None:
            return
        if self.member.variant is Variant.FAST:
            if hb.member_id == ME and hb.incarnation == inc:
                self.obs[partition, inc].append(hb.sent_mono)
        elif self.exclusive:
            self.obs[partition, inc].append(hb.sent_wall if publish_wall is None else publish_wall)
        else:
            self.obs[partition, inc].append(self.member.mono)

    def expected_leads(self, partition: int) -> bool:
        """Whether the member should lead ``partition`` now, from the model's inputs alone."""
        m = self.member
        inc = m.tracker.incarnation(partition)
        if inc is None or partition not in self.assigned | self.released:
            return False
        if self.exclusive:
            stall_limit = (m.config.stall_limit_ms or 0) / 1000
            if m.mono - self.last_tick > stall_limit or m.mono < self.suspect_until:
                return False
        if not self.obs[partition, inc]:
            return False
        if self.exclusive and m.mono - self.assigned_at[partition, inc] < T:
            return False  # the grace period after a new assignment (both variants)
        if self.full_exclusive:
            return m.wall - max(self.obs[partition, inc]) < T
        return m.mono - max(self.obs[partition, inc]) < T

    def record(self, transitions: list[Transition]) -> None:
        """Check reported transitions against the transition table and remember them."""
        for tr in transitions:
            before = self.last_kind.get(tr.partition)
            assert tr.kind in ALLOWED_NEXT[before], f"{before} -> {tr.kind} on {tr.partition}"
            self.last_kind[tr.partition] = tr.kind
            self.seen[tr.kind] += 1


def _active(kind: EventKind | None) -> bool:
    return kind in (EventKind.ACQUIRED, EventKind.RESUMED, EventKind.FENCED)


def _step(rng: random.Random, m: Member, model: Model) -> str:
    """Apply one random input to the tracker and the model; return what was done."""
    tracker = m.tracker
    op = rng.choices(
        ["assign", "revoke", "heartbeat", "advance", "tick", "evaluate"],
        weights=[1, 1, 6, 4, 1, 3],
    )[0]
    if op == "assign":
        parts = rng.sample(list(PARTITIONS), rng.randint(1, 2))
        held = tracker.led_or_assigned()
        m.assign(*parts)
        model.assigned.update(parts)
        model.released.difference_update(parts)
        for p in parts:
            key = (p, tracker.incarnation(p) or 0)
            if p not in held:
                assert key not in model.assigned_at, f"incarnation reused for {p}"
                model.assigned_at[key] = m.mono
        return f"assign {parts}"
    if op == "revoke":
        parts = rng.sample(list(PARTITIONS), rng.randint(1, 2))
        release = rng.random() < 0.5
        held = tracker.led_or_assigned()
        keeps = release and not model.exclusive
        expected = [p for p in parts if p in held and not keeps and _active(model.last_kind.get(p))]
        out = m.revoke(*parts, release=release)
        assert [t.partition for t in out] == expected
        assert all(t.kind is EventKind.REVOKED and t.reason == "rebalance" for t in out)
        model.record(out)
        model.assigned.difference_update(parts)
        if keeps:
            model.released.update(p for p in parts if p in held)
        else:
            model.released.difference_update(parts)
        return f"revoke {parts} release={release}"
    if op == "heartbeat":
        p = rng.choice(PARTITIONS)
        sender = rng.choice(["own", "own-old", "other"])
        inc = tracker.incarnation(p) or 0
        hb = m.heartbeat(
            p,
            member_id=OTHER if sender == "other" else ME,
            incarnation=inc - 1 if sender == "own-old" else inc,
            age=rng.choice([0.0, 0.125, 0.5, 1.0, 1.875, 2.5]),
        )
        publish_wall = rng.choice([hb.sent_wall, hb.sent_wall - 0.25, None])
        tracker.observe(p, hb, publish_wall, m.mono)
        model.observe(p, hb, publish_wall)
        return f"heartbeat {p} {sender} age={m.mono - hb.sent_mono} publish={publish_wall}"
    if op == "advance":
        # Mostly short steps; now and then one past the stall limit (1 s in exclusive mode).
        dt = rng.choices([0.0625, 0.125, 0.25, 0.5, 1.0, 1.25], weights=[4, 4, 4, 2, 1, 1])[0]
        m.jump(dt)
        ticked = rng.random() < 0.95
        if ticked:
            m.tick()
            model.tick()
        return f"advance {dt} tick={ticked}"
    if op == "tick":
        m.tick()
        model.tick()
        return "tick"
    out = m.evaluate()
    model.record(out)
    model.released &= tracker.led_or_assigned()
    for p in PARTITIONS:  # what was just reported is what holds now
        assert m.leads(p) == (model.last_kind.get(p) in (EventKind.ACQUIRED, EventKind.RESUMED))
    for p in tracker.led_or_assigned() - tracker.assigned():
        assert m.leads(p), f"released partition {p} kept after going stale"
    return f"evaluate -> {[(t.kind.value, t.partition) for t in out]}"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("combo", COMBOS)
def test_random_histories_match_the_model(combo: tuple[Variant, Mode], seed: int) -> None:
    """Over random histories, leads() matches the model and transitions follow the table."""
    m = Member(*combo)
    model = Model(m, last_tick=m.mono)
    rng = random.Random(seed)
    done: list[str] = []
    for _ in range(STEPS):
        done.append(_step(rng, m, model))
        context = "\n".join(done[-12:])
        tracker = m.tracker
        assert tracker.assigned() == model.assigned, context
        assert tracker.led_or_assigned() <= model.assigned | model.released, context
        led = tracker.led(m.mono, m.wall)
        for p in PARTITIONS:
            leads = m.leads(p)
            assert leads == model.expected_leads(p), f"partition {p}: {m.why_not(p)}\n{context}"
            assert leads == (p in led), context
            if p not in tracker.led_or_assigned():
                assert m.why_not(p) == "not assigned", context
    # The history must have exercised every transition, or it proves little.
    assert set(model.seen) == set(EventKind), model.seen
