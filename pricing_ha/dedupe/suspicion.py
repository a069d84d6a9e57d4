"""What a relay member does with its detector's answers: take quiet partitions over, hold them.

:class:`~.detector.Detector` says which partitions of ``prices`` this member should take over
because they went quiet (their owner looks gone). :class:`Suspicions` acts on that, from the
worker thread:

* it moves them from STANDBY to SUSPECTING (:mod:`.lifecycle`), then takes them over like
  any takeover (fence, marker, marks: :mod:`.succession`) through the
  worker's ``take_over``, traced as a ``relay.takeover`` span with
  ``pricing_ha.takeover.reason = "suspicion"`` and counted (``RelayStats.suspicions``);
* it holds each one taken as a partition being handed over (:mod:`.handover`): emitted on
  until the member the group assigns it to asks for it, or until the group gives it to this
  member; the group needs S and a rebalance for that, so the bound is 2 S + 5 s;
* it shows that the partitions it emits on without a heartbeat claiming them (held, or being
  handed over) are alive: a ``tick`` when one has been quiet for D / 3.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping

from opentelemetry import trace

from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.detector import Detector
from pricing_ha.dedupe.handover import HandOvers
from pricing_ha.dedupe.lifecycle import PartitionLifecycle, PartitionState
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.member.worker import TakeoverDeferredError

__all__ = ["Suspicions"]

log = logging.getLogger("pricing_ha.relay")


class Suspicions:
    """Takeovers on suspicion, and the liveness pulse (see the module docstring).

    Args:
        detector: decides which partitions are quiet with this member as their successor.
        standby: this member's tail of ``prices``.
        control: writes the ticks.
        handovers: where a partition taken over is held.
        take_over: takes partitions up (the worker's ``assign_many`` on suspicion, then marks
            them worked on); returns those deferred.
        tracer: for the ``relay.takeover`` spans.
        stats: counts the takeovers begun on suspicion.
        session_timeout_s: the relay group's S (how long the group takes to follow).
        lifecycles: the member's partitions (shared with the worker).
    """

    def __init__(
        self,
        detector: Detector,
        standby: StandbyTail,
        control: ControlWriter,
        handovers: HandOvers,
        *,
        take_over: Callable[[list[int]], dict[int, TakeoverDeferredError]],
        tracer: trace.Tracer,
        stats: RelayStats,
        session_timeout_s: float,
        lifecycles: Mapping[int, PartitionLifecycle],
    ) -> None:
        """Nothing taken over yet."""
        self.detector = detector
        self._standby = standby
        self._control = control
        self._handovers = handovers
        self._take_over = take_over
        self._tracer = tracer
        self._stats = stats
        self._bound_s = max(handovers.bound_s, 2 * session_timeout_s + 5.0)
        self._lifecycles = lifecycles

    def tend(self, now: float, busy: Collection[int]) -> None:
        """Take over the quiet partitions not in ``busy`` (worked on, assigned, deferred or in
        a grace period here), then pulse the ones held or handed over."""
        partitions = range(len(self._standby.views))
        found = self.detector.take_over([p for p in partitions if p not in busy], now)
        if found:
            self._take(found, {p: self.detector.quiet_for(p, now) for p in found})
        pulse_s = self.detector.threshold_s / 3
        for partition in sorted(self._handovers.partitions()):
            lc = self._lifecycles[partition]
            quiet = now - self._standby.last_record(partition)
            if quiet > pulse_s and now - lc.pulsed > pulse_s:
                lc.pulsed = now
                self._control.tick(partition)

    def _take(self, partitions: list[int], quiet: dict[int, float | None]) -> None:
        for partition in partitions:
            self._lifecycles[partition].move(PartitionState.SUSPECTING)
        log.warning(
            "partitions %s quiet for %s s: taking them over (their owner looks gone)",
            partitions,
            {p: round(q or 0.0, 3) for p, q in quiet.items()},
        )
        with self._tracer.start_as_current_span(
            "relay.takeover",
            attributes={
                "pricing_ha.takeover.reason": "suspicion",
                "pricing_ha.partitions": partitions,
            },
        ) as span:
            deferred = self._take_over(partitions)
            span.set_attribute("pricing_ha.taken", [p for p in partitions if p not in deferred])
        self._stats.suspicions += len(partitions)
        for partition in partitions:
            if partition in deferred:
                log.info(
                    "partition %d: takeover on suspicion deferred: %s",
                    partition,
                    deferred[partition].reason,
                )
                continue
            self._handovers.begin(partition, bound_s=self._bound_s)
