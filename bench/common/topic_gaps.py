"""What the relay takeover benchmark reads back, and how it measures a silence.

:class:`PricesTail` follows ``prices`` throughout (``read_committed``, as subscribers read
it): every record's producer timestamp and ``relay`` header, how long each took to reach this
reader (the same run's one-hop reference), and every control record (its kind and writer).
:class:`InputTail` follows ``prices.raw``, the relays' input, both publishing groups' copies
as one. A silence is the longest gap between
consecutive timestamps whose later one falls in a window (:func:`max_gap_ms`); the hand-over
gap is the one at a change of relay (:func:`handover_gap_ms`); the baseline is the longest gap
per 3 s sub-window of a fault-free window (:func:`baseline_gaps`).
"""

from __future__ import annotations

import itertools
import math
import time

from confluent_kafka import OFFSET_END, Message

from pricing_ha.dedupe.control import PROBE
from pricing_ha.kafka.headers import CONTROL_HEADER, header_dict, is_control
from pricing_ha.local.tails import TopicTail

Rec = tuple[int, int, str]  # offset, timestamp ms, relay
Ctl = tuple[int, int, str, str]  # a control record: offset, timestamp ms, relay, kind
BASELINE_SUB_S = 3.0  # about the window a sigterm or join silence is measured over


class PricesTail:
    """Follows ``prices`` from the beginning: per partition, (offset, timestamp ms, relay).

    Also keeps each record's hop: how long after its producer timestamp (the relay's
    ``produce()``) this reader had it, the wall clock being the same on the machine; every
    control record per partition (:data:`Ctl`: takeover markers, checkpoints...); and the
    producer timestamps of the relays' probes (a relay writes one on each partition a
    rebalance gives it, in its grace period: the moment a rebalance reaches the price path).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, skip: str) -> None:
        """Start following (records whose key starts with ``skip`` are the preload: ignored)."""
        self.records: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
        self.hops: list[tuple[int, float]] = []  # (timestamp ms, received - timestamp ms)
        self.probed_ms: list[int] = []  # probes' timestamps, as read
        self.controls: dict[int, list[Ctl]] = {p: [] for p in range(partitions)}
        self._skip = skip.encode()
        self._tail = TopicTail(
            bootstrap, [topic], partitions, self._keep, on_control=self._controls
        )

    def _keep(self, batch: list[Message], _received: float) -> None:
        now_ms = time.time() * 1000
        for msg in batch:
            key = msg.key()
            if key is not None and key.startswith(self._skip):
                continue
            relay = header_dict(msg.headers()).get("relay", "")
            p, offset, ts = msg.partition() or 0, msg.offset() or 0, msg.timestamp()[1]
            self.records[p].append((offset, ts, relay))
            self.hops.append((ts, now_ms - ts))

    def _controls(self, batch: list[Message]) -> None:
        for msg in batch:
            headers = msg.headers()
            if not is_control(msg.key(), headers):
                continue
            values = header_dict(headers)
            kind, ts = values.get(CONTROL_HEADER, ""), msg.timestamp()[1]
            p = msg.partition() or 0
            self.controls[p].append((msg.offset() or 0, ts, values.get("relay", ""), kind))
            if kind == PROBE.decode():
                self.probed_ms.append(ts)

    def first_probe_ms(self, lo_ms: float, hi_ms: float) -> int | None:
        """The earliest probe produced in [lo_ms, hi_ms], if any."""
        return min((ts for ts in list(self.probed_ms) if lo_ms <= ts <= hi_ms), default=None)

    def hops_ms(self, lo_ms: float, hi_ms: float) -> list[float]:
        """The hops of the records produced in [lo_ms, hi_ms]."""
        return [h for ts, h in list(self.hops) if lo_ms <= ts <= hi_ms]

    def latest(self) -> dict[int, Rec]:
        """The latest record of each partition that has one."""
        return {p: rs[-1] for p, rs in self.records.items() if rs}

    def close(self) -> None:
        """Stop following."""
        self._tail.close()


class InputTail:
    """Follows ``prices.raw`` from its end: per partition, the producer timestamp (ms) of every
    copy either publishing group wrote there (the relay's input, both copies as one).

    A relay cannot emit a price before its input has it: a gap in the union of both groups'
    copies (the feed, the publishers, their broker hops, the machine) shows on ``prices`` too,
    and is not the relay's. :meth:`silence_ms` is that gap, for the same window as a silence
    on ``prices``.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        """Start following."""
        self._stamps: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self._tail = TopicTail(
            bootstrap, [topic], partitions, self._keep, start=OFFSET_END, name="bench-input"
        )

    def _keep(self, batch: list[Message], _received: float) -> None:
        for msg in batch:
            self._stamps[msg.partition() or 0].append(msg.timestamp()[1])

    def stamps(self) -> dict[int, list[int]]:
        """A copy of the timestamps kept so far, per partition (in arrival order)."""
        return {p: list(ts) for p, ts in self._stamps.items()}

    def silence_ms(self, partition: int, lo_ms: float, hi_ms: float) -> int:
        """The longest gap between consecutive copies (by timestamp) on ``partition`` whose
        later one falls in [lo_ms, hi_ms]."""
        where = longest_gap_at(sorted(self._stamps[partition]), lo_ms, hi_ms)
        return 0 if where is None else where[1] - where[0]

    def close(self) -> None:
        """Stop following."""
        self._tail.close()


def max_gap_ms(recs: list[Rec], lo_ms: float, hi_ms: float) -> int:
    """Longest gap between consecutive records whose later one falls in [lo_ms, hi_ms]."""
    where = worst_gap_at_ms(recs, lo_ms, hi_ms)
    return 0 if where is None else where[1] - where[0]


def worst_gap_at_ms(recs: list[Rec], lo_ms: float, hi_ms: float) -> list[int] | None:
    """Where the longest gap of :func:`max_gap_ms` lies: the producer timestamps (ms) of the
    records before and after it, to line it up with the relays' logs."""
    return longest_gap_at([r[1] for r in recs], lo_ms, hi_ms)


def longest_gap_at(stamps: list[int], lo_ms: float, hi_ms: float) -> list[int] | None:
    """The timestamps around the longest gap between consecutive ``stamps`` whose later one
    falls in [lo_ms, hi_ms] (None: no such pair)."""
    pairs = [(a, b) for a, b in itertools.pairwise(stamps) if lo_ms <= b <= hi_ms]
    if not pairs:
        return None
    a, b = max(pairs, key=lambda ab: ab[1] - ab[0])
    return [a, b]


def handover_gap_ms(recs: list[Rec], lo_ms: float, hi_ms: float) -> int | None:
    """The longest gap at a change of relay (the last record of one, the first of the next)
    whose later record falls in [lo_ms, hi_ms]; None if the partition did not move then.

    The part of a silence that the move itself costs: a silence is the longest gap of the
    window, which on a loaded machine may be a gap of the upstream path, not the move's.
    """
    gaps = [
        b[1] - a[1] for a, b in itertools.pairwise(recs) if a[2] != b[2] and lo_ms <= b[1] <= hi_ms
    ]
    return max(gaps, default=None)


def baseline_gaps(recs: list[Rec], lo_ms: float, hi_ms: float) -> list[float]:
    """The longest gap (s) in each whole consecutive 3 s sub-window of [lo_ms, hi_ms].

    A gap between consecutive records counts in the sub-window its later record falls in (as
    the silences do) and in every sub-window it spans without a record.
    """
    sub_ms = BASELINE_SUB_S * 1000
    n = int((hi_ms - lo_ms) // sub_ms)
    worst = [0] * n
    for a, b in itertools.pairwise(recs):
        k_a = math.floor((a[1] - lo_ms) / sub_ms)
        k_b = math.floor((b[1] - lo_ms) / sub_ms)
        for k in range(max(min(k_a + 1, k_b), 0), min(k_b + 1, n)):
            worst[k] = max(worst[k], b[1] - a[1])
    return [w / 1000 for w in worst]
