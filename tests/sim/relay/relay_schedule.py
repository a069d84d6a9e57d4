"""Seeded schedules of the relay simulation: build a world, run steps, check ``prices``.

A schedule is a list of :data:`Step` tuples (data, so a failing one can be printed, shrunk and
replayed); the world's own random draws (latencies, batch sizes) come from a generator seeded
by the schedule's seed, so a replay of the same steps is the same run. The steps and raw
prices are drawn in :mod:`tests.sim.relay.relay_steps`; simulated time is
:mod:`tests.sim.relay.relay_clock`.
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, Any, cast

from confluent_kafka import Consumer, Producer

from pricing_ha.config import AppConfig
from pricing_ha.config._roles import RelayConfig
from pricing_ha.dedupe.relay import RelayClients, RelayStats, RelayWorker
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.member.worker import TakeoverDeferredError
from pricing_ha.telemetry import Telemetry
from tests.sim.relay.relay_checker import Checker, Outcome, headers_of, key_of
from tests.sim.relay.relay_clock import PumpCondition, SimTime, real_clocks, simulated_time
from tests.sim.relay.relay_consumers import FakeConsumer, FakeReader
from tests.sim.relay.relay_members import Members, SimLivenessReader
from tests.sim.relay.relay_neli import SimNeli
from tests.sim.relay.relay_producer import FakeProducer
from tests.sim.relay.relay_steps import MEMBERS, Step, raw_prices
from tests.sim.relay.relay_world import Faults, World

if TYPE_CHECKING:
    from pricing_ha.dedupe.liveness import LivenessReader

_TELEMETRY = Telemetry.noop("sim")


def sim_config(**relay: int) -> AppConfig:
    """The defaults (topics prices/prices.raw, 4 partitions, the relay's timing, window
    500 ms), with any other ``[relay]`` settings given."""
    cfg = AppConfig()
    return dataclasses.replace(
        cfg,
        relay=dataclasses.replace(cfg.relay, **relay),  # type: ignore[arg-type]
    )


def _threshold_s(relay: RelayConfig) -> float:
    return relay.threshold_ms / 1000


# -- running ----------------------------------------------------------------------------------


def build(
    seed: int,
    *,
    ghosts: bool,
    verbose: bool,
    output_gaps: bool = False,
    relay: dict[str, int] | None = None,
    detector: bool = False,
) -> tuple[World, dict[str, RelayWorker]]:
    """A world with two relay members, nothing assigned, ``prices.raw`` not yet published;
    ``relay``: ``[relay]`` settings other than the defaults; ``detector``: the members get
    heartbeats (:mod:`tests.sim.relay.relay_members`) and the takeover detector is on."""
    cfg = sim_config(**(relay or {}))
    clock = SimTime()
    world = World(
        clock=clock,
        rng=random.Random(seed),
        raw=cfg.topics.raw,
        prices=cfg.topics.prices,
        threshold_s=_threshold_s(cfg.relay),
        partitions=cfg.topics.partitions,
        ghosts=ghosts,
        output_gaps=output_gaps,
        verbose=verbose,
    )
    clock.world = world
    world.evidence_rng = random.Random(f"{seed}-evidence")  # (the seed's other draws unchanged)
    for topic in (world.raw, world.prices, cfg.topics.raw_dlq):
        world.topic(topic)
    if detector:
        world.members = Members(
            world, cfg.relay.pulse_interval_ms / 1000, cfg.relay.session_timeout_ms / 1000
        )
        world.members.cfg, world.members.seed = cfg, seed
    workers: dict[str, RelayWorker] = {}
    for name in MEMBERS:
        world.faults[name] = Faults()
        workers[name] = start_member(world, cfg, seed, name)
    return world, workers


def start_member(world: World, cfg: AppConfig, seed: int, name: str) -> RelayWorker:
    """A new process of relay member ``name``: its worker, its tail opened."""
    clock = world.clock
    members = world.members
    reader = (
        None
        if members is None
        else SimLivenessReader(members.liveness_for(name, cfg.relay.takeover_after_s))
    )
    worker = RelayWorker(
        cfg,
        "relay",
        name,
        SimNeli(world, name),
        RelayStats(),
        telemetry=_TELEMETRY,
        clients=_clients(world, name),
        liveness=cast("LivenessReader | None", reader),
    )
    # Reading ahead of a takeover: kept whole, or paused after a few records (its own rng,
    # so that a seed's schedule does not change with this choice).
    worker.read_ahead.max_kept = random.Random(f"{seed}-{name}").choice((2, 40, 20_000))
    # Clocks injected at construction (defaulting to the real one) get the simulated one.
    worker.read_ahead._clock = clock.monotonic
    worker._producers.producer._clock = clock.monotonic
    leaks = real_clocks(worker)
    assert not leaks, f"the simulated relay still holds real clocks at {leaks}"
    if worker.detector is not None:
        worker.detector._started = clock.now  # read from the real clock at construction
        if members is not None and worker.suspicions is not None:
            take_over = worker.suspicions._take_over

            def spied(partitions: list[int]) -> dict[int, TakeoverDeferredError]:
                members.suspected(name, partitions)
                return take_over(partitions)

            worker.suspicions._take_over = spied
    worker.standby._changed = PumpCondition(clock)  # type: ignore[assignment]
    worker.standby.open()
    world.workers[name] = worker
    return worker


def _read_all(world: World, name: str, *, resume: bool) -> StandbyTail:
    """A fresh standby tail of member ``name`` that has read ``prices`` to its end."""
    world.faults[name] = Faults()
    tail = StandbyTail(
        {},
        world.prices,
        world.partitions,
        f"{name}/",
        reader=lambda _s: FakeReader(world, name),
        resume=resume,
    )
    tail.open()
    ends = [len(records) for records in world.topic(world.prices)]
    for _ in range(sum(ends) + 10):
        if all(v.position >= end for v, end in zip(tail.views, ends, strict=True)):
            break
        tail.step(0)
    return tail


def compare_resumed(world: World) -> tuple[list[str], int]:
    """A member joining now resumes from checkpoints: its views must equal those of a member
    that read ``prices`` from the start. Returns the differences and how many partitions
    resumed from a checkpoint."""
    resumed = _read_all(world, "joiner", resume=True)
    full = _read_all(world, "reader", resume=False)
    keys = ("position", "high", "last_data", "term", "released_term", "released_at", "requests")
    out = [
        f"prices[{p}] resumed from {resumed.resumed.get(p)}: {key} {getattr(a, key)!r}, "
        f"read from the start: {getattr(b, key)!r}"
        for p, (a, b) in enumerate(zip(resumed.views, full.views, strict=True))
        for key in keys
        if getattr(a, key) != getattr(b, key)
    ]
    return out, len(resumed.resumed)


def _clients(world: World, name: str) -> RelayClients:
    """Fake clients for member ``name`` (typed as the real ones: the fakes are duck-typed)."""

    def consumer(_settings: dict[str, Any]) -> Consumer:
        return cast("Consumer", FakeConsumer(world))

    def producer(settings: dict[str, Any]) -> Producer:
        return cast("Producer", FakeProducer(world, name, settings))

    def reader(_settings: dict[str, Any]) -> FakeReader:
        return FakeReader(world, name)

    return RelayClients(consumer=consumer, producer=producer, reader=reader)


def _turn(world: World, worker: RelayWorker, batch_max: int) -> None:
    """One turn of the worker loop (``PartitionWorker._run``'s body), without its thread."""
    worker._apply_commands()
    worker._reconcile()
    worker.tend()
    if not worker.reading():
        return
    consumer = cast("FakeConsumer", worker.consumer)
    batch = consumer.take(batch_max, world.rng)
    if batch:
        if worker._starting:
            worker.note_read(batch)
        worker.process(batch)
    else:
        worker.no_input()


def apply_step(world: World, workers: dict[str, RelayWorker], step: Step, raw: Any) -> None:
    """Apply one schedule step."""
    kind = step[0]
    world.note(f"STEP {step}")
    members = world.members
    if members is not None and (
        kind in ("crash", "pause", "pause-in-flush", "cut", "join")
        or (kind in ("turn", "tail") and not members.runs(step[1]))  # crashed or paused
    ):
        _process_fault(world, workers, members, step)
    elif kind == "turn":
        _turn(world, workers[step[1]], step[2])
    elif kind == "publish":
        _, p, n = step
        log = world.topic(world.raw)[p]
        for key, value, headers in raw[p][len(log) : len(log) + n]:
            world.append(world.raw, p, key=key, value=value, headers=headers)
    elif kind == "tail":
        workers[step[1]].standby.step(0)
    elif kind == "advance":
        world.clock.advance(step[1])
    elif kind == "move":
        _, p, target, planned, zombie = step
        # (Not to a member the group has seen gone.)
        gone = members is not None and target is not None and not members.assignable(target)
        if world.owner.get(p) != target and not gone:
            world.move(p, target, planned=planned, zombie_s=zombie)
    elif kind == "fence":
        world.fence(step[1], step[2])
    elif kind == "resume":
        world.resume(step[1], step[2])
    elif kind in ("slow", "fail", "silent"):
        setattr(world.faults[step[1]], f"{kind}_until", world.clock.now + step[2])
    elif kind == "stall":
        world.stalled_until[step[1]] = world.clock.now + step[2]
    world.tick()


def _process_fault(
    world: World, workers: dict[str, RelayWorker], members: Members, step: Step
) -> None:
    """A fault of a whole process (:mod:`tests.sim.relay.relay_members`), or its restart (a
    turn or a tail read of a crashed or paused member does nothing)."""
    kind, name = step[0], step[1]
    if kind == "crash":
        members.crash(name)
    elif kind == "pause":
        members.pause(name, step[2])
    elif kind == "pause-in-flush":
        world.stop_in_flush[name] = lambda stopped: _sleep_in_flush(
            world, workers, stopped, step[2]
        )
    elif kind == "cut":
        members.cut(name, step[2])
    elif kind == "join" and members.restart(name):
        world.faults[name] = Faults()
        workers[name] = start_member(world, members.cfg, members.seed, name)


def _sleep_in_flush(
    world: World, workers: dict[str, RelayWorker], name: str, seconds: float
) -> None:
    """Member ``name`` is stopped in a flush for ``seconds``: the others run meanwhile."""
    members = world.members
    assert members is not None
    members.pause(name, seconds)
    world.in_flush.add(name)  # (a member stopped further up the stack does not run either)
    woken = world.clock.now + seconds
    while world.clock.now < woken:
        world.clock.advance(min(0.025, woken - world.clock.now))
        world.tick()
        world.pump()
        for other, worker in workers.items():
            if other not in world.in_flush and members.runs(other):
                _turn(world, worker, 50)
    world.in_flush.discard(name)
    world.tick()  # it wakes


def _drained(world: World, workers: dict[str, RelayWorker]) -> bool:
    raw_log = world.topic(world.raw)
    for p in range(world.partitions):
        owner = world.owner.get(p)
        if owner is None or world.committed.get(p, 0) < len(raw_log[p]):
            return False
        if p not in workers[owner].active or world.zombies or world.in_flight:
            return False
    return True


def drain(world: World, workers: dict[str, RelayWorker], raw: Any, checker: Checker) -> bool:
    """Heal every fault, publish the rest, give every partition an owner, run until drained."""
    world.stop_in_flush.clear()
    if world.members is not None:
        for name in world.members.heal_all():
            _process_fault(world, workers, world.members, ("join", name))
    for faults in world.faults.values():
        faults.slow_until = faults.fail_until = faults.silent_until = 0.0
    world.stalled_until.clear()
    for p in range(world.partitions):
        apply_step(world, workers, ("publish", p, 10_000), raw)
        for name in MEMBERS:
            world.resume(name, p)
        if world.owner.get(p) is None:
            world.move(p, MEMBERS[p % 2], planned=False, zombie_s=0.0)
    for _ in range(400):
        world.clock.advance(0.05)
        world.tick()
        world.pump()
        for name in MEMBERS:
            _turn(world, workers[name], 50)
        checker.scan(-1)
        if _drained(world, workers):
            return True
    return False


def run(
    seed: int,
    steps: list[Step],
    *,
    ghosts: bool = False,
    output_gaps: bool = False,
    verbose: bool = False,
    detector: bool = False,
) -> Outcome:
    """Run ``steps`` in a fresh world seeded by ``seed``, drain, and check ``prices``."""
    raw = raw_prices(seed)
    world, workers = build(
        seed, ghosts=ghosts, verbose=verbose, output_gaps=output_gaps, detector=detector
    )
    outcome = Outcome(seed, steps, detector=detector)
    checker = Checker(world)
    with simulated_time(world.clock):
        for i, step in enumerate(steps):
            apply_step(world, workers, step, raw)
            checker.scan(i)
            if checker.violations:
                break
        if not checker.violations and not drain(world, workers, raw, checker):
            owners = {p: world.owner.get(p) for p in range(world.partitions)}
            outcome.stuck = (
                f"not drained: owners {owners}, committed {world.committed}, raw ends "
                f"{[len(r) for r in world.topic(world.raw)]}, active "
                f"{ {n: sorted(w.active) for n, w in workers.items()} }, deferred "
                f"{ {n: w.deferred for n, w in workers.items()} }"
            )
    outcome.violations = checker.violations
    outcome.ghost_violations = checker.ghost_violations
    if not outcome.violations and not outcome.stuck:
        offered: dict[str, set[int]] = {}
        for records in world.topic(world.raw):
            for rec in records:
                h = headers_of(rec)
                if "seq" in h:
                    offered.setdefault(key_of(rec), set()).add(int(h["seq"]))
        for instrument, seqs in sorted(offered.items()):
            missing = sorted(seqs - checker.seen.get(instrument, set()))
            if missing:
                outcome.losses.append(f"{instrument}: seqs {missing} never reached prices")
        with simulated_time(world.clock):
            outcome.resume_mismatches, outcome.resumed = compare_resumed(world)
    outcome.relayed = sum(w.stats.relayed for w in workers.values())
    outcome.takeovers = sum(w.stats.takeovers for w in workers.values())
    outcome.fenced_records = world.fenced_records
    if world.members is not None:
        outcome.suspicions = world.members.suspicions
        outcome.wrong_suspicions = world.members.wrong_suspicions
    outcome.trace = world.trace
    return outcome


def shrink(outcome: Outcome, *, ghosts: bool = False, budget: int = 300) -> Outcome:
    """Drop steps while the schedule still fails (greedy, chunks then single steps)."""
    best = outcome
    tries = 0
    chunk = max(1, len(best.steps) // 4)
    while chunk >= 1 and tries < budget:
        i = 0
        while i < len(best.steps) and tries < budget:
            candidate = best.steps[:i] + best.steps[i + chunk :]
            tries += 1
            got = run(best.seed, candidate, ghosts=ghosts, detector=outcome.detector)
            if got.failed and _same_kind(got, outcome):
                best = got
            else:
                i += chunk
        chunk //= 2
    return best


def _same_kind(a: Outcome, b: Outcome) -> bool:
    return (
        bool(a.violations) == bool(b.violations)
        and bool(a.losses) == bool(b.losses)
        and bool(a.resume_mismatches) == bool(b.resume_mismatches)
    )


def report(outcome: Outcome) -> str:
    """A failing schedule, with how to replay it."""
    replay = run(outcome.seed, outcome.steps, verbose=True, detector=outcome.detector)
    trace = replay.trace
    first = next((i for i, line in enumerate(trace) if "VIOLATION" in line), None)
    if first is not None:
        trace = trace[: first + 1]
    lines = [
        f"seed {outcome.seed}: {len(outcome.steps)} steps",
        *outcome.violations[:5],
        *outcome.losses[:5],
        *([outcome.stuck] if outcome.stuck else []),
        *outcome.resume_mismatches[:5],
        f'replay: RELAY_SIM_SEED={outcome.seed} RELAY_SIM_STEPS="{outcome.steps!r}" '
        f"RELAY_SIM_DETECTOR={int(outcome.detector)} "
        ".venv/bin/pytest tests/sim/relay/test_relay_sim.py -k replay -s",
        "trace (up to the first violation):",
        *trace[-150:],
    ]
    return "\n".join(lines)
