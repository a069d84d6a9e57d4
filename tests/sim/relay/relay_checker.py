"""Judging a relay simulation run: :class:`Checker` scans ``prices`` as it grows, and
:class:`Outcome` is what one schedule did (:mod:`tests.sim.relay.relay_schedule` runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import Message

from pricing_ha.kafka.headers import CONTROL_HEADER, header_list
from tests.sim.relay.relay_steps import Step
from tests.sim.relay.relay_world import World

__all__ = ["Checker", "Outcome", "headers_of", "key_of"]


@dataclass
class Outcome:
    """What one schedule did."""

    seed: int
    steps: list[Step]
    violations: list[str] = field(default_factory=list)
    ghost_violations: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    stuck: str | None = None
    resume_mismatches: list[str] = field(default_factory=list)
    resumed: int = 0  # partitions a fresh tail started from a checkpoint at the end
    relayed: int = 0
    takeovers: int = 0
    detector: bool = False
    suspicions: int = 0  # takeovers on suspicion begun (the detector)
    wrong_suspicions: int = 0  # ... of a partition whose holder was alive
    fenced_records: int = 0  # records for prices rejected: their producer had been fenced
    trace: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A duplicate or out-of-order seq, a loss, a relay that never drained, or a tail
        resumed from checkpoints that differs from one that read ``prices`` from its start."""
        return bool(self.violations or self.losses or self.stuck or self.resume_mismatches)

    @property
    def writer_violations(self) -> list[str]:
        """The violations of "one unfenced writer per partition" (see :class:`Checker`)."""
        return [v for v in self.violations if "writer" in v]


def headers_of(rec: Message) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in header_list(rec.headers()):
        out[name] = value.decode() if isinstance(value, bytes) else str(value)
    return out


def key_of(rec: Message) -> str:
    key = rec.key()
    return key.decode() if isinstance(key, bytes) else str(key)


class Checker:
    """Scans ``prices`` as it grows: per instrument, data seqs strictly increase; and never
    more than one unfenced writer per partition.

    The second is checked in this form: every record a transactional producer wrote on
    ``prices[k]`` was written under the one ``transactional.id`` of partition k, and along
    the log the producer epochs never decrease, so the records of two writers never
    interleave (the broker model rejects a record whose epoch is no longer current when it
    would land, aborted records included, so this holds iff every writer of k is fenced by
    the next one's ``init_transactions``).
    """

    def __init__(self, world: World) -> None:
        """Nothing checked yet."""
        self._world = world
        self._pos = [0] * world.partitions
        self.last: dict[str, int] = {}
        self.seen: dict[str, set[int]] = {}
        self.violations: list[str] = []
        self.ghost_violations: list[str] = []
        self._writer: dict[int, tuple[str, int]] = {}  # partition -> latest (id, epoch)

    def scan(self, step: int) -> None:
        """Check the records appended since the last scan."""
        world = self._world
        for p, records in enumerate(world.topic(world.prices)):
            for offset, rec in enumerate(records[self._pos[p] :], start=self._pos[p]):
                self._check_writer(step, p, offset)
                headers = headers_of(rec)
                if CONTROL_HEADER in headers:
                    continue
                instrument = key_of(rec)
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

    def _check_writer(self, step: int, p: int, offset: int) -> None:
        fence = self._world.writer_of.get((p, offset))
        if fence is None:
            return
        last = self._writer.get(p)
        if last is not None and (fence[0] != last[0] or fence[1] < last[1]):
            line = (
                f"step {step}: prices[{p}]@{offset}: writer {fence} after writer {last}: "
                "two writers interleave"
            )
            self._world.note(f"VIOLATION {line}")
            self.violations.append(line)
        elif last is None or fence[1] > last[1]:
            self._writer[p] = fence
