"""Replay one schedule: ``python -m tests.sim.neli_group.replay SCENARIO SEED '[Event(...), ...]'``.

Without the event list, the schedule is the one the seed generates. Prints every violation and,
with ``-v``, each member's leadership at every change.
"""

from __future__ import annotations

import ast
import random
import sys
from collections.abc import Callable

from tests.sim.neli_group.group_schedule import Event, random_events
from tests.sim.neli_group.groupsim import Simulation
from tests.sim.neli_group.scenarios import SCENARIOS


def parse_events(text: str) -> list[Event]:
    """Parse a printed event list (``[Event(at, kind, member[, arg][, frozen=True]), ...]``)."""
    events = []
    for node in ast.parse(text, mode="eval").body.elts:  # type: ignore[attr-defined]
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Event"):
            raise ValueError(f"not an Event(...): {ast.unparse(node)}")
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        events.append(Event(*args, **kwargs))
    return events


def main(argv: list[str]) -> int:
    """Replay and report; exit status 1 if an invariant broke."""
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    scenario, seed = SCENARIOS[args[0]], int(args[1])
    if len(args) > 2:
        events = parse_events(args[2])
    else:
        events = random_events(scenario, random.Random(seed))
    sim = Simulation(scenario, seed, events)
    if verbose:
        sim.on_step = _printer(sim)
    violations = sim.run(stop_at_first=False)
    for v in violations:
        print(v)
    print(f"{len(violations)} violation(s)")
    return 1 if violations else 0


def _printer(sim: Simulation) -> Callable[[], None]:
    last: dict[str, tuple[int, ...]] = {}

    def show() -> None:
        for proc in sim.procs.values():
            if not proc.alive:
                continue
            led = tuple(p for p in range(sim.scenario.partitions) if proc.leads(p, sim.now))
            state = (*led, -1 if proc.running(sim.now) else -2)
            if last.get(proc.member_id) != state:
                last[proc.member_id] = state
                run = "running" if proc.running(sim.now) else "paused"
                print(
                    f"t={sim.now:6d} {proc.member_id} {run} leads {list(led)} "
                    f"assigned {sorted(proc.assignment)}"
                )

    return show


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
