"""The relay's partition worker: when a partition is taken up, let go or started over.

:class:`RelayWorker` does the Kafka work of one relay member (:mod:`pricing_ha.dedupe.relay`)
for the partitions NELI gives it, in the worker thread (:mod:`pricing_ha.member.worker`). It
builds the member's clients (:mod:`.relay_clients`) and the parts that do the work, and decides
when a partition starts, stops or starts over. Where this member stands on each partition is
one :class:`~.lifecycle.PartitionLifecycle` per partition, in :attr:`RelayWorker.lifecycles`
(states and checked transitions: :mod:`.lifecycle`, drawn in ``docs/relay.md``):

* **takeover** (:meth:`RelayWorker.assign_many`): what must be established first (the
  previous owner fenced, a takeover marker on ``prices[k]``, the standby's high-water marks
  just before it) is :mod:`.succession`; then ``prices.raw[k]`` is consumed from
  the group's committed position (every position it is read from: :mod:`.raw_input`);
* **grace periods and hand-overs** (:meth:`RelayWorker.tend`, inherited from
  :class:`~.tending.RelayTending`): a probe while in the grace period, ended early on a clean
  release or by fencing (:mod:`.grace_period`), and the partition read ahead
  (:mod:`.read_ahead`), so its takeover starts from records in hand; a planned revocation
  handed over until the successor asks (:mod:`.handover`); an owner's checkpoints
  (:mod:`.control_writer`);
* **the hot path** (:meth:`RelayWorker.process`): arbitration, output (:mod:`.output`) and
  commits, and a partition whose output failed started over, are :mod:`.hot_path`;
* **letting go** (:meth:`RelayWorker.unassign`): flush, then a release marker if everything
  produced there was acknowledged.

:class:`~.relay_clients.RelayClients` and :class:`~.succession.LeadershipSource` are its seams:
the relay simulation (``tests/sim``) drives one with fake clients and a simulated group.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Message

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.arbitration import Bounds
from pricing_ha.dedupe.control import RELEASE
from pricing_ha.dedupe.control_writer import ControlWriter
from pricing_ha.dedupe.detector import Detector
from pricing_ha.dedupe.grace_period import GracePeriods
from pricing_ha.dedupe.handover import HandOvers
from pricing_ha.dedupe.hot_path import HotPath
from pricing_ha.dedupe.lifecycle import PartitionLifecycle, PartitionState, lifecycles
from pricing_ha.dedupe.liveness import LivenessReader
from pricing_ha.dedupe.output import RelayOutput
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.raw_input import RawInput
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.relay_clients import (
    RelayClients,
    kafka_consumer,
    raw_group_id,
    standby_settings,
)
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.dedupe.succession import MARKER_TIMEOUT_S, LeadershipSource, Succession
from pricing_ha.dedupe.suspicion import Suspicions
from pricing_ha.dedupe.tending import RelayTending
from pricing_ha.member.worker import TakeoverDeferredError
from pricing_ha.telemetry import Telemetry

__all__ = ["LeadershipSource", "RelayWorker"]

log = logging.getLogger("pricing_ha.relay")


class RelayWorker(RelayTending):
    """The relay's partition worker (see the module docstring).

    Built by :class:`Relay`; the simulation (``tests/sim``) drives one directly with fake
    clients (``clients``) and :class:`neli.testing.FakeNeli`.
    """

    def __init__(
        self,
        cfg: AppConfig,
        group: str,
        member: str,
        neli: LeadershipSource,
        stats: RelayStats,
        *,
        telemetry: Telemetry,
        clients: RelayClients | None = None,
        liveness: LivenessReader | None = None,
    ) -> None:
        """Create the clients; nothing is read until :meth:`start`.

        ``liveness`` (the reader of the relay group's heartbeats) turns on the takeover
        detector (:mod:`.detector`) when ``[relay] takeover_after_ms`` is not 0.
        """
        clients = clients or RelayClients(consumer=kafka_consumer)
        kafka_stats = telemetry.kafka_stats.settings()  # lag, queues, broker round trips
        super().__init__("relay", clients.raw_consumer(cfg, group, member, kafka_stats), neli.leads)
        self._cfg = cfg
        self._neli = neli
        self.stats = stats
        telemetry.metrics.watch_takeovers(lambda: (self.stats.takeovers, self.stats.suspicions))
        self._producers = OutputProducers(
            cfg,
            member,
            raw_group_id(group),
            stats=stats,
            producer_factory=clients.producer,
            parallel_commits=clients.producer is None,
            extra_settings=kafka_stats,
        )
        self._out = RelayOutput(
            cfg,
            member,
            raw_group_id(group),
            self._producers,
            self._may_emit,
            stats=stats,
            telemetry=telemetry,
        )
        self._control = ControlWriter(cfg, member, self._producers, stats=stats)
        self.standby = StandbyTail(
            standby_settings(cfg, member),
            cfg.topics.prices,
            cfg.topics.partitions,
            self._control.token,
            reader=clients.reader,
        )
        #: Where this member stands on each partition of ``prices`` (:mod:`.lifecycle`).
        self.lifecycles: dict[int, PartitionLifecycle] = lifecycles(cfg.topics.partitions)
        self._handovers = HandOvers(
            self.standby,
            self._control,
            neli.takeover,
            read_as_of=self._producers.read_as_of,
            lifecycles=self.lifecycles,
            wanted=self.wanted,
            drop=self.drop,
        )
        self._grace = GracePeriods(
            self.standby,
            self._control,
            neli.takeover,
            self.lifecycles,
            clock_skew_s=cfg.relay.clock_skew_ms / 1000,
        )
        self._succession = Succession(self.standby, self._control, neli)
        #: ``prices.raw`` partitions read ahead of their takeover (:mod:`.read_ahead`).
        self.read_ahead = ReadAhead(self.consumer, cfg.topics.raw)
        self._raw = RawInput(
            self.consumer,
            cfg.topics.raw,
            self.read_ahead,
            starting=lambda partitions, unknown: self.starting(partitions, unknown=unknown),
        )
        self._hot = HotPath(
            self._out,
            self._raw,
            self.read_ahead,
            window_s=cfg.relay.reorder_window_ms / 1000,
            bounds=Bounds(
                max_seq_jump=cfg.sequence.max_seq_jump,
                max_epoch_skew_ms=cfg.sequence.max_epoch_skew_ms,
            ),
            may_emit=self._may_emit,
            handing_over=self._handovers.__contains__,
            asked=self._handovers.asked,
            active=self.active,
            drop=self.drop,
            commit=self.commit_async,
            limits=cfg.limits,
            resets=self.standby.resets_after,
        )
        self._next_tend = 0.0
        self._liveness = liveness
        d_s = cfg.relay.takeover_after_s
        #: Takeovers on suspicion (:mod:`.suspicion`): with the heartbeats' reader, unless D = 0.
        self.suspicions = (
            None
            if liveness is None or d_s == 0
            else Suspicions(
                Detector(
                    d_s,
                    liveness.liveness,
                    last_record=self.standby.last_record,
                    caught_up=self.standby.caught_up,
                    recovering=neli.takeover.recovering,
                    started=time.monotonic(),
                ),
                self.standby,
                self._control,
                self._handovers,
                take_over=self._take_over_suspected,
                tracer=telemetry.tracer(),
                stats=stats,
                session_timeout_s=cfg.relay.session_timeout_ms / 1000,
                lifecycles=self.lifecycles,
            )
        )
        self._events = 0  # NELI's events for this worker so far (counted on the event loop)

    def start(self) -> None:
        """Start the standby tail (and the heartbeats' reader), then the worker thread."""
        self.standby.start()
        if self._liveness is not None:
            self._liveness.start()
        self._raw.warm()  # before the worker thread uses the consumer
        super().start()

    def stop(self) -> None:
        """Let hand-overs in progress finish (bounded by their bound), then stop."""
        deadline = time.monotonic() + self._handovers.bound_s + 1.0
        # (A revocation's hand-over may still be a queued command: the barrier did not wait.)
        while (self._handovers or self.commands_pending()) and time.monotonic() < deadline:
            time.sleep(0.01)
        super().stop()

    def hand_over(self, partition: int) -> bool:
        """A revocation (planned, or the session lost) or a fence: keep emitting until the
        successor asks (:mod:`.handover`).

        The barrier returns at once and the rebalance goes on while this member keeps
        ``prices[k]`` flowing. The successor's probe or takeover marker stops it: it then
        flushes and writes its release marker, which the successor is waiting for. A member
        that is stopping waits for its hand-overs before it closes.
        """
        return self._handovers.begin(partition)

    def will_hand_over(self, partition: int) -> bool:
        """A partition with a term is handed over (:meth:`hand_over`), so the barrier need not
        wait: until the worker applies it, :meth:`_may_emit` says no (NELI no longer leads it,
        no hand-over yet) and its records are only paused."""
        return self.lifecycles[partition].owned

    # -- ownership ----------------------------------------------------------------------------

    def assign(self, partition: int) -> None:
        """Take ``partition`` up (see :meth:`assign_many`)."""
        deferred = self.assign_many([partition])
        if partition in deferred:
            raise deferred[partition]

    def assign_many(
        self, partitions: list[int], *, suspected: bool = False
    ) -> dict[int, TakeoverDeferredError]:
        """Take partitions up: takeover marker, the standby's marks up to it, then consume.

        What must hold before a partition is emitted on (a takeover marker acknowledged, the
        standby's marks just before it, no previous owner still emitting) is established by
        :meth:`.succession.Succession.establish`; a partition for which it cannot be yet is
        deferred and tried again. Then each partition taken up starts from those marks, and
        ``prices.raw[k]`` is consumed from the group's committed position.
        """
        t0 = time.monotonic()
        for partition in partitions:
            self.lifecycles[partition].move(PartitionState.TAKING_OVER)
        try:
            return self._take_over(partitions, suspected=suspected, t0=t0)
        finally:
            for partition in partitions:  # deferred (or failed): retried from STANDBY
                if self.lifecycles[partition].state is PartitionState.TAKING_OVER:
                    self.lifecycles[partition].move(PartitionState.STANDBY)

    def _take_over(
        self, partitions: list[int], *, suspected: bool, t0: float
    ) -> dict[int, TakeoverDeferredError]:
        """:meth:`assign_many` for partitions TAKING_OVER: those taken end OWNING."""
        deferred: dict[int, TakeoverDeferredError] = {}
        for partition in partitions:
            if not self.standby.caught_up(partition):
                # A member that just joined is still reading prices[k]'s history. Writing the
                # marker now would stop an owner handing k over and leave k silent until the
                # read ends (growing with retention): the owner goes on until we are ready.
                deferred[partition] = TakeoverDeferredError(
                    "the standby tail is still reading the partition's history", retry_after_s=0.1
                )
        if not suspected:
            # No grace period left, yet the owner still emits: ask it first (.grace_period),
            # reading the partition ahead meanwhile; retried at the worker's next turn.
            held = self._grace.hold_for_release([p for p in partitions if p not in deferred])
            for partition, why in held.items():
                deferred[partition] = TakeoverDeferredError(why, retry_after_s=0.0, routine=True)
            self._read_ahead([p for p in held if p in self.wanted])
        partitions = [p for p in partitions if p not in deferred]
        # Reading ahead from here lets the first fetch overlap the marker's round trip (a grace
        # period that NELI ended on evidence may have left no time for a probe and a read ahead).
        self._read_ahead([p for p in partitions if p in self.wanted or suspected])
        taken: list[int] = []
        induced = partitions if suspected else ()
        for partition, snap in self._succession.establish(partitions, deferred, induced=induced):
            self._hot.take_up(partition, snap.high, snap.offset)
            self.lifecycles[partition].own(snap.offset)
            taken.append(partition)
            took = time.monotonic() - t0
            self.stats.takeovers += 1
            self.stats.rebuild_s.append(took)
            log.info(
                "relay took partition %d%s (takeover marker at offset %d, ready in %.3f s)",
                partition,
                " on suspicion" if suspected else "",
                snap.offset,
                took,
            )
        if taken:
            self._raw.start_reading(taken)
        return deferred

    def _take_over_suspected(self, partitions: list[int]) -> dict[int, TakeoverDeferredError]:
        """Take ``partitions`` up on suspicion (:mod:`.suspicion`); return those deferred."""
        deferred = self.assign_many(partitions, suspected=True)
        self.active.update(p for p in partitions if p not in deferred)
        return deferred

    def reading(self) -> bool:
        """Partitions worked on, or read ahead of their takeover."""
        return bool(self.active) or self.read_ahead.reading()

    def unassign(self, partition: int) -> None:
        """Flush, release, then stop consuming ``prices.raw[k]``.

        The flush makes a revocation's barrier wait for this relay's output. When every record
        this member produced to ``prices[k]`` was acknowledged, a release marker naming its term
        says so: the next owner then need not wait out its grace period. Records held in the
        reorder window are re-read by the next owner.
        """
        failed = self._out.flush(self._hot.arbiters)
        lasted = self._handovers.end(partition)
        if lasted is not None:
            log.info("partition %d handed over after %.2f s", partition, lasted)
        lifecycle = self.lifecycles[partition]
        term = lifecycle.term
        lifecycle.move(PartitionState.STANDBY)
        # Not for a partition whose output failed (its producer is gone: fenced, or the broker
        # did not answer): its records may be lost, and writing the release could only wait
        # out its timeout (0.8 s of a stalled worker in a benchmark run).
        if partition not in failed and term is not None and self._producers.fences.holds(partition):
            released = self._control.write_markers(
                [partition], RELEASE, MARKER_TIMEOUT_S, terms={partition: term}
            )
            if partition not in released:
                log.warning("partition %d: the release marker was not acknowledged", partition)
        self._producers.mark_failed(failed - {partition})  # handled by the next batch
        self.commit_async([], now=True)  # what was held back for a partition starting
        self._raw.stop(partition)
        self._out.report(self._hot.arbiters)
        self._hot.forget(partition)
        self._out.forget(partition)

    def close_clients(self) -> None:
        """Flush output, then close the input consumer and the standby tail."""
        self._producers.close()
        self.commit_async([], now=True)
        self.consumer.close()
        self.standby.close()
        if self._liveness is not None:
            self._liveness.close()

    def join_held(self) -> str | None:
        """Joining the relay group waits for the standby tail to catch up (unless it failed).

        A member that joined first had its partitions handed to it while it was still
        reading their history: it deferred each takeover, the owner's hand-over ran out
        meanwhile, and the partition went silent (the fault drill: up to 6.4 s on a loaded
        machine, where the catching up also slowed the owner until it fenced itself).
        """
        return None if self.standby.error is not None else self.standby.problem()

    def standby_problem(self) -> str | None:
        """Why the standby is not ready, or ``None`` (readiness): its tail behind, or the
        liveness reader the detector needs down."""
        problem = self.standby.problem()
        if problem is None and self._liveness is not None:
            problem = self._liveness.problem()
        return problem

    def output_problem(self) -> str | None:
        """Why output to ``prices`` cannot be delivered now, or ``None`` (readiness)."""
        return self._producers.problem

    def may_resume(self) -> bool:
        """Start failed partitions over only once a replaced producer's broker answers."""
        return self._producers.may_resume()

    # -- the hot path -------------------------------------------------------------------------

    def process(self, batch: list[Message]) -> None:
        """Arbitrate a batch, emit, flush, commit what is safe to commit (:mod:`.hot_path`)."""
        self._hot.process(batch)

    def idle(self) -> None:
        """Release records whose reorder window has passed, even with no new input."""
        self._hot.idle()
