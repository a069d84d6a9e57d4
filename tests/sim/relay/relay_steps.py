"""What a relay simulation schedule is made of: its random steps and the raw prices it publishes.

A schedule is a list of :data:`Step` tuples (data, so a failing one can be printed, shrunk and
replayed); :func:`random_steps` draws one from a seed, :func:`raw_prices` the interleaved copies
of both publishing groups on ``prices.raw``.
"""

from __future__ import annotations

import random
from typing import Any

from pricing_ha.publishing.pricing import Price, encode_price

Step = tuple[Any, ...]
MEMBERS = ("A", "B")
PARTITIONS = 4
INSTRUMENTS_PER_PARTITION = 2


#: Faults of a whole process, drawn only with the takeover detector on
#: (:mod:`tests.sim.relay.relay_members`): crashes, pauses (SIGSTOP, then SIGCONT) from under D to
#: past S, cut-offs from the broker, a crashed member started again (a join), and a crash
#: followed, once the group noticed, by the member joining again while the survivor holds
#: its partitions on suspicion (one taken back from it by a planned move).
DETECTOR_FAULTS = [("crash", 2), ("pause", 4), ("cut", 2), ("join", 2), ("crash-join", 2)]


def random_steps(seed: int, n: int = 120, *, detector: bool = False) -> list[Step]:
    """A random schedule of ``n`` steps (see :func:`run` for what each does); with the
    detector, faults of whole processes too (:data:`DETECTOR_FAULTS`)."""
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
    if detector:
        weighted += DETECTOR_FAULTS
    kinds = [k for k, w in weighted for _ in range(w)]
    for _ in range(n):
        kind = rng.choice(kinds)
        m = rng.choice(MEMBERS)
        p = rng.randrange(PARTITIONS)
        if kind in dict(DETECTOR_FAULTS):
            steps.extend(_process_fault(rng, kind, m, p))
        elif kind == "turn":
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


def _process_fault(rng: random.Random, kind: str, m: str, p: int) -> list[Step]:
    if kind == "pause":  # D = 0.35 s < T = 0.6 s < S = 1 s (the relay's defaults)
        # Between two turns, or mid-transaction: in its next flush, records unsent.
        how = rng.choice(["pause", "pause-in-flush"])
        return [(how, m, rng.choice([0.2, 0.45, 0.55, 0.8, 2.0]))]
    if kind == "cut":
        return [("cut", m, rng.choice([0.45, 0.8, 2.0]))]
    if kind != "crash-join":
        return [(kind, m)]
    other = MEMBERS[1 - MEMBERS.index(m)]
    return [
        ("crash", m),
        ("advance", rng.choice([0.2, 0.4])),
        ("turn", other, rng.randint(1, 12)),
        ("advance", 0.2),
        ("turn", other, rng.randint(1, 12)),
        ("advance", 0.7),  # past S: the group has noticed
        ("join", m),
        ("turn", other, rng.randint(1, 12)),
        ("move", p, m, True, 0.0),
    ]


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
