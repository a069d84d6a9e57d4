"""Throughput of A/B arbitration (``pricing_ha.dedupe.arbitration.Arbiter``), the relay's hot path.

Two copies (groups p1 and p2) of 1M seqs spread over 100 instruments: 2M offers. The second
copy trails the first by a few positions; 1% of the first copy's seqs are swapped with their
successor (so they are held and released) and 0.1% are lost from the first copy (filled in by
the second, within the window). Time advances by 1 µs per offer; ``expire`` is called once per
batch of 500 offers, as a consumer loop would. The stream is generated before timing.

Run: ``.venv/bin/python -m bench.relay_failover.arbitration``
"""

from __future__ import annotations

import argparse
import random
import time

from bench.common.report import summary, write
from pricing_ha.dedupe.arbitration import Arbiter

SEQS = 1_000_000
INSTRUMENTS = 100
TRAIL = 7  # the second copy's lag, in offers
BATCH = 500
WINDOW_S = 0.05
RUNS = 3


def _stream(seed: int = 1) -> list[tuple[str, int, str]]:
    """The offers: (instrument, seq, source), both copies interleaved."""
    rng = random.Random(seed)
    names = [f"SYM{i:03d}" for i in range(INSTRUMENTS)]
    per = SEQS // INSTRUMENTS
    primary: list[tuple[str, int, str]] = []
    for seq in range(1, per + 1):
        primary.extend((name, seq, "p1/a") for name in names)
    for i in range(INSTRUMENTS, len(primary) - INSTRUMENTS):  # seq 1 first: it starts a line
        if rng.random() < 0.01:  # swap with the same instrument's next seq
            j = i + INSTRUMENTS
            primary[i], primary[j] = primary[j], primary[i]
    secondary = [(name, seq, "p2/a") for name, seq, _ in primary]
    secondary.sort(key=lambda o: (o[1], o[0]))  # the second copy is in order
    lost = {i for i in range(len(primary)) if rng.random() < 0.001}
    out: list[tuple[str, int, str]] = []
    for i, offer in enumerate(primary):
        if i not in lost:
            out.append(offer)
        if i >= TRAIL:
            out.append(secondary[i - TRAIL])
    out.extend(secondary[len(secondary) - TRAIL :])
    return out


def _run(stream: list[tuple[str, int, str]]) -> tuple[float, Arbiter[int]]:
    arb: Arbiter[int] = Arbiter(WINDOW_S)
    offer, expire = arb.offer, arb.expire
    emitted = 0
    now = 0.0
    t0 = time.perf_counter()
    for start in range(0, len(stream), BATCH):
        for instrument, seq, source in stream[start : start + BATCH]:
            emitted += len(offer(instrument, seq, seq, source, now))
        now += BATCH * 1e-6
        emitted += len(expire(now))
    emitted += len(expire(now + 1.0))
    elapsed = time.perf_counter() - t0
    assert emitted == arb.emitted == SEQS, (emitted, arb.emitted)
    assert arb.gaps == 0, arb.gaps
    return elapsed, arb


def main() -> None:
    """Measure RUNS times and write the figures."""
    argparse.ArgumentParser(description=__doc__.split("\n", 1)[0]).parse_args()
    stream = _stream()
    rates: list[float] = []
    arb: Arbiter[int] | None = None
    for _ in range(RUNS):
        elapsed, arb = _run(stream)
        rates.append(len(stream) / elapsed)
        print(f"{len(stream)} offers in {elapsed:.2f} s: {rates[-1]:,.0f} offers/s", flush=True)
    assert arb is not None
    write(
        "arbitration",
        {
            "offers": len(stream),
            "seqs": SEQS,
            "instruments": INSTRUMENTS,
            "reorder_window_s": WINDOW_S,
            "offers_per_s": summary(rates),
            "best_ns_per_offer": round(1e9 / max(rates), 1),
            "emitted": arb.emitted,
            "duplicates": arb.duplicates,
            "reordered": arb.reordered,
            "gaps": arb.gaps,
            "switches": arb.switches,
        },
    )


if __name__ == "__main__":
    main()
