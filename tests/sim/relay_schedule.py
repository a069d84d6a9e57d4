"""Seeded schedules of the relay simulation: build a world, run steps, check ``prices``.

A schedule is a list of :data:`Step` tuples (data, so a failing one can be printed, shrunk and
replayed); the world's own random draws (latencies, batch sizes) come from a generator seeded
by the schedule's seed, so a replay of the same steps is the same run.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import Consumer, Message, Producer

import pricing_ha.dedupe
from pricing_ha.config import AppConfig
from pricing_ha.config._roles import RelayConfig
from pricing_ha.dedupe.relay import RelayClients, RelayStats, RelayWorker
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.kafka.headers import CONTROL_HEADER, header_list
from pricing_ha.member import worker as worker_mod
from pricing_ha.publishing.pricing import Price, encode_price
from pricing_ha.telemetry import Telemetry
from tests.sim.relay_clock import PumpCondition, SimTime
from tests.sim.relay_consumers import FakeConsumer, FakeReader
from tests.sim.relay_neli import SimNeli
from tests.sim.relay_producer import FakeProducer
from tests.sim.relay_world import Faults, World

Step = tuple[Any, ...]
MEMBERS = ("A", "B")
PARTITIONS = 4
INSTRUMENTS_PER_PARTITION = 2

_TELEMETRY = Telemetry.noop("sim")


def sim_config(fencing: str = "transactions") -> AppConfig:
    """The defaults (topics prices/prices.raw, 4 partitions, T = 1.6 s, window 500 ms), with
    the relay's ``fencing``."""
    cfg = AppConfig()
    return dataclasses.replace(cfg, relay=dataclasses.replace(cfg.relay, fencing=fencing))


def _threshold_s(relay: RelayConfig) -> float:
    return relay.threshold_ms / 1000


@dataclass
class Outcome:
    """What one schedule did."""

    seed: int
    steps: list[Step]
    fencing: str = "transactions"
    violations: list[str] = field(default_factory=list)
    ghost_violations: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    stuck: str | None = None
    resume_mismatches: list[str] = field(default_factory=list)
    resumed: int = 0  # partitions a fresh tail started from a checkpoint at the end
    relayed: int = 0
    takeovers: int = 0
    trace: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A duplicate or out-of-order seq, a loss, a relay that never drained, or a tail
        resumed from checkpoints that differs from one that read ``prices`` from its start."""
        return bool(self.violations or self.losses or self.stuck or self.resume_mismatches)


# -- the schedule ---------------------------------------------------------------------------


def random_steps(seed: int, n: int = 120) -> list[Step]:
    """A random schedule of ``n`` steps (see :func:`run` for what each does)."""
    rng = random.Random(seed)
    # Everything starts assigned somewhere.
    steps: list[Step] = [("move", p, rng.choice(MEMBERS), False, 0.0) for p in range(PARTITIONS)]
    weighted = [
        ("turn", 30),
        ("publish", 10),
        ("tail", 10),
        ("advance", 12),
        ("move", 6),
        ("fence", 3),
        ("resume", 3),
        ("slow", 2),
        ("fail", 2),
        ("silent", 2),
        ("stall", 2),
    ]
    kinds = [k for k, w in weighted for _ in range(w)]
    for _ in range(n):
        kind = rng.choice(kinds)
        m = rng.choice(MEMBERS)
        p = rng.randrange(PARTITIONS)
        if kind == "turn":
            steps.append(("turn", m, rng.randint(1, 12)))
        elif kind == "publish":
            steps.append(("publish", p, rng.randint(1, 8)))
        elif kind == "tail":
            steps.append(("tail", m))
        elif kind == "advance":
            steps.append(("advance", rng.choice([0.005, 0.02, 0.1, 0.3, 0.6, 1.0, 2.5])))
        elif kind == "move":
            planned = rng.random() < 0.6
            # A zombie goes on leading after the move until its client notices (at most about
            # 0.5 s in practice); up to 1.9 s, beyond T = 1.6 s, is harsher than that on purpose.
            zombie = 0.0 if planned or rng.random() < 0.3 else rng.uniform(0.0, 1.9)
            target = rng.choice([*MEMBERS, None]) if rng.random() < 0.9 else None
            steps.append(("move", p, target, planned, round(zombie, 3)))
        elif kind in ("fence", "resume"):
            steps.append((kind, m, p))
        elif kind == "silent":  # past _CATCH_UP_S sometimes: the takeover is deferred
            steps.append((kind, m, rng.choice([0.2, 1.0, 4.0, 8.0])))
        elif kind == "stall":  # held off after a stall (NELI: S + 0.5 s after waking)
            steps.append((kind, m, rng.choice([0.5, 2.5])))
        else:
            steps.append((kind, m, rng.choice([0.2, 1.0, 4.0])))
    return steps


def raw_prices(seed: int, seqs: int = 25) -> list[list[tuple[bytes, bytes | None, list[Any]]]]:
    """Each partition's ``prices.raw`` records: both groups' copies, interleaved, some missing.

    Every seq has at least one copy, and each seq's *first* copy comes after the first copy
    of the seq before it (the second copy lands anywhere up to ~3 seqs later). No seq then
    ever arrives after its successor, so a correct relay never declares a gap, whatever the
    timing: every seq offered must reach ``prices``, and a declared gap is a loss. One record
    in about 150 is malformed (it goes to the DLQ).
    """
    rng = random.Random(seed * 7919 + 1)
    out = []
    for p in range(PARTITIONS):
        items: list[tuple[float, bytes, bytes | None, list[Any]]] = []
        for i in range(INSTRUMENTS_PER_PARTITION):
            instrument = f"I{p}{'abcdefgh'[i]}"
            for seq in range(1, seqs + 1):
                copies = rng.choices([("p1", "p2"), ("p1",), ("p2",)], [8, 1, 1])[0]
                price = Price(
                    instrument=instrument,
                    seq=seq,
                    bid=1.0,
                    ask=1.1,
                    mid=1.05,
                    source_time_ns=1_700_000_000_000_000_000 + seq,
                )
                for n, group in enumerate(copies):
                    member = rng.choice("ab")
                    headers = [
                        ("seq", str(seq).encode()),
                        ("group", group.encode()),
                        ("member", member.encode()),
                        ("publish_ns", str(1_700_000_000_000_000_000 + seq).encode()),
                    ]
                    at = seq + (rng.uniform(0, 0.01) if n == 0 else rng.uniform(0.02, 3))
                    items.append((at, instrument.encode(), encode_price(price), headers))
                if rng.random() < 0.007:
                    items.append((seq + 0.5, instrument.encode(), b"not a price", []))
        items.sort(key=lambda t: t[0])
        out.append([(k, v, h) for _, k, v, h in items])
    return out


# -- running ----------------------------------------------------------------------------------

_REAL_CLOCKS = (time.monotonic, time.time, time.time_ns, time.perf_counter)


def _decides(kind: type) -> bool:
    """Whether objects of ``kind`` can steer the relay: the project's own, but for its
    telemetry (metrics read clocks for what they report, and nothing reads them back)."""
    module = getattr(kind, "__module__", "")
    return module.startswith("pricing_ha") and not module.startswith("pricing_ha.telemetry")


def real_clocks(root: object, depth: int = 4) -> list[str]:
    """Where, among ``root``'s attributes (followed ``depth`` objects deep), a real clock
    function is held: a run would then depend on the machine's clocks, not only on its seed.

    (It happened: a worker command's creation time came from the real monotonic clock and its
    age from the simulated one, so on a machine up for less than the simulated clock's start
    every simulated hand-over was refused as too old.)
    """
    found: list[str] = []
    seen: set[int] = set()

    def walk(obj: object, path: str, left: int) -> None:
        if id(obj) in seen or left < 0:
            return
        seen.add(id(obj))
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            return
        for name, value in attrs.items():
            if any(value is c for c in _REAL_CLOCKS):
                found.append(f"{path}.{name}")
            elif _decides(type(value)):
                walk(value, f"{path}.{name}", left - 1)

    walk(root, type(root).__name__, depth)
    return found


def _time_users() -> list[Any]:
    """The relay's modules that read the ``time`` module: every module of
    :mod:`pricing_ha.dedupe` that imports it, and the partition worker's. Found, not listed, so
    that a new module cannot run on the real clock inside a simulation."""
    package = pricing_ha.dedupe
    names = [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    mods = [importlib.import_module(name) for name in names]
    return [m for m in [*mods, worker_mod] if getattr(m, "time", None) is time]


@contextmanager
def simulated_time(clock: SimTime) -> Iterator[None]:
    """The relay's modules see ``clock`` as their ``time`` module; their logs are quiet."""
    mods = _time_users()
    saved = [m.time for m in mods]
    quiet = logging.getLogger("pricing_ha")
    level, quiet_level = quiet.level, logging.CRITICAL
    try:
        for m in mods:
            m.time = clock  # type: ignore[attr-defined]
        quiet.setLevel(quiet_level)
        yield
    finally:
        for m, t in zip(mods, saved, strict=True):
            m.time = t  # type: ignore[attr-defined]
        quiet.setLevel(level)


def _headers(rec: Message) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in header_list(rec.headers()):
        out[name] = value.decode() if isinstance(value, bytes) else str(value)
    return out


def _key(rec: Message) -> str:
    key = rec.key()
    return key.decode() if isinstance(key, bytes) else str(key)


class Checker:
    """Scans ``prices`` as it grows: per instrument, data seqs strictly increase."""

    def __init__(self, world: World) -> None:
        """Nothing checked yet."""
        self._world = world
        self._pos = [0] * world.partitions
        self.last: dict[str, int] = {}
        self.seen: dict[str, set[int]] = {}
        self.violations: list[str] = []
        self.ghost_violations: list[str] = []

    def scan(self, step: int) -> None:
        """Check the records appended since the last scan."""
        world = self._world
        for p, records in enumerate(world.topic(world.prices)):
            for rec in records[self._pos[p] :]:
                headers = _headers(rec)
                if CONTROL_HEADER in headers:
                    continue
                instrument = _key(rec)
                seq = int(headers["seq"])
                last = self.last.get(instrument, 0)
                seen = self.seen.setdefault(instrument, set())
                if seq <= last:
                    what = "duplicate" if seq in seen else "out of order"
                    line = (
                        f"step {step}: prices[{p}]@{rec.offset()}: {instrument} seq {seq} "
                        f"{what} after {last} (from {headers.get('relay', '?')})"
                    )
                    world.note(f"VIOLATION {line}")
                    ghostly = any(g[0] == p for g in world.ghost_records)
                    (self.ghost_violations if ghostly else self.violations).append(line)
                else:
                    self.last[instrument] = seq
                seen.add(seq)
            self._pos[p] = len(records)


def build(
    seed: int,
    *,
    ghosts: bool,
    verbose: bool,
    output_gaps: bool = False,
    fencing: str = "transactions",
) -> tuple[World, dict[str, RelayWorker]]:
    """A world with two relay members, nothing assigned, ``prices.raw`` not yet published."""
    cfg = sim_config(fencing)
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
    workers: dict[str, RelayWorker] = {}
    for name in MEMBERS:
        world.faults[name] = Faults()
        clients = _clients(world, name)
        worker = RelayWorker(
            cfg,
            "relay",
            name,
            SimNeli(world, name),
            RelayStats(),
            telemetry=_TELEMETRY,
            clients=clients,
        )
        # Reading ahead of a takeover: kept whole, or paused after a few records (its own rng,
        # so that a seed's schedule does not change with this choice).
        worker.read_ahead.max_kept = random.Random(f"{seed}-{name}").choice((2, 40, 20_000))
        # Clocks injected at construction (defaulting to the real one) get the simulated one.
        worker.read_ahead._clock = clock.monotonic
        worker._producers.producer._clock = clock.monotonic
        leaks = real_clocks(worker)
        assert not leaks, f"the simulated relay still holds real clocks at {leaks}"
        worker.standby._changed = PumpCondition(clock)  # type: ignore[assignment]
        worker.standby.open()
        workers[name] = worker
        world.workers[name] = worker
    return world, workers


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
    if kind == "turn":
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
        if world.owner.get(p) != target:
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
    fencing: str = "transactions",
) -> Outcome:
    """Run ``steps`` in a fresh world seeded by ``seed``, drain, and check ``prices``."""
    raw = raw_prices(seed)
    world, workers = build(
        seed, ghosts=ghosts, verbose=verbose, output_gaps=output_gaps, fencing=fencing
    )
    outcome = Outcome(seed, steps, fencing)
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
                h = _headers(rec)
                if "seq" in h:
                    offered.setdefault(_key(rec), set()).add(int(h["seq"]))
        for instrument, seqs in sorted(offered.items()):
            missing = sorted(seqs - checker.seen.get(instrument, set()))
            if missing:
                outcome.losses.append(f"{instrument}: seqs {missing} never reached prices")
        with simulated_time(world.clock):
            outcome.resume_mismatches, outcome.resumed = compare_resumed(world)
    outcome.relayed = sum(w.stats.relayed for w in workers.values())
    outcome.takeovers = sum(w.stats.takeovers for w in workers.values())
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
            got = run(best.seed, candidate, ghosts=ghosts, fencing=outcome.fencing)
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
    replay = run(outcome.seed, outcome.steps, verbose=True, fencing=outcome.fencing)
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
        f"RELAY_SIM_FENCING={outcome.fencing} "
        ".venv/bin/pytest tests/sim/test_relay_sim.py -k replay -s",
        "trace (up to the first violation):",
        *trace[-150:],
    ]
    return "\n".join(lines)
