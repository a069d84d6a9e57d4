"""The relay's partition worker: standby, takeover, hand-over, arbitration, output.

:class:`RelayWorker` does the Kafka work of one relay member (:mod:`pricing_ha.dedupe.relay`)
for the partitions NELI gives it, in the worker thread (:mod:`pricing_ha.member.worker`):

* **takeover** (:meth:`RelayWorker.assign_many`): what must be established first (a takeover
  marker on ``prices[k]``, the standby's high-water marks just before it, the waits a
  partition not released needs) is :mod:`.succession`; then ``prices.raw[k]`` is consumed from
  the group's committed position (every position it is read from: :mod:`.raw_input`);
* **grace periods and hand-overs** (:meth:`RelayWorker.tend`): a probe while in the grace
  period, ended early on a clean release (:mod:`.succession`); a planned revocation handed
  over until the successor asks (:mod:`.handover`);
* **the hot path** (:meth:`RelayWorker.process`): arbitration (:mod:`.arbitration`), output
  (:mod:`.output`), commits once output is acknowledged and nothing earlier is held; a
  partition in its grace period is read ahead (:mod:`.read_ahead`), so its takeover starts
  from records in hand.

:class:`RelayClients` and :class:`~.succession.LeadershipSource` are its seams: the relay
simulation (``tests/sim``) drives one with fake clients and a simulated group.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    Message,
    Producer,
)

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.arbitration import Arbiter
from pricing_ha.dedupe.control import RELEASE
from pricing_ha.dedupe.handover import HandOvers
from pricing_ha.dedupe.output import RelayOutput, RelayStats
from pricing_ha.dedupe.raw_input import FETCH_SETTINGS, RawInput
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.records import RawPrice, as_bytes, parse_raw_record
from pricing_ha.dedupe.restart import Restarts
from pricing_ha.dedupe.standby import StandbyTail
from pricing_ha.dedupe.succession import MARKER_TIMEOUT_S, LeadershipSource, Succession
from pricing_ha.kafka.headers import header_list
from pricing_ha.member.worker import PartitionWorker, TakeoverDeferredError
from pricing_ha.publishing.pricing import InvalidPriceError
from pricing_ha.telemetry import Telemetry
from pricing_ha.telemetry.pricepath import sampled_context

__all__ = ["LeadershipSource", "RelayClients", "RelayWorker", "raw_group_id", "relay_group_id"]

log = logging.getLogger("pricing_ha.relay")

_TEND_EVERY_S = 0.02  # how often hand-overs and grace periods are looked at
_PAUSE_MAX_S = 1.0  # a partition no longer led, with no event saying why, is dropped after this
# An owner appends a checkpoint of its standby view to each partition it emits on about this
# often (when prices arrived since): a member joining reads about this much of prices[k].
_CHECKPOINT_EVERY_S = 1.0


def relay_group_id(group: str) -> str:
    """The NELI consumer group of relay group ``group`` (``pricing.relay`` by default)."""
    return f"pricing.{group}"


def raw_group_id(group: str) -> str:
    """The consumer group holding relay group ``group``'s committed ``prices.raw`` positions."""
    return f"pricing.{group}.raw"


@dataclass(frozen=True)
class RelayClients:
    """How a relay worker builds its Kafka clients (the simulation passes fakes).

    Attributes:
        consumer: the ``prices.raw`` consumer, from its settings.
        producer: the ``prices`` producer (a replacement too), from its settings.
        reader: the standby tail's consumer of ``prices``, from its settings.
    """

    consumer: Callable[[dict[str, Any]], Consumer]
    producer: Callable[[dict[str, Any]], Producer] | None = None
    reader: Callable[[dict[str, Any]], Any] | None = None


def _kafka_consumer(settings: dict[str, Any]) -> Consumer:
    return Consumer(settings, logger=log)


class RelayWorker(PartitionWorker):
    """The relay's partition worker: standby, takeover, hand-over, arbitration, output.

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
    ) -> None:
        """Create the clients; nothing is read until :meth:`start`."""
        clients = clients or RelayClients(consumer=_kafka_consumer)
        broker = cfg.broker
        base = dict(FETCH_SETTINGS)
        super().__init__(
            "relay",
            clients.consumer(
                broker.client_config(
                    defaults=base,
                    required={
                        "group.id": raw_group_id(group),
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        "auto.offset.reset": "earliest",
                        "client.id": f"relay-{member}-raw",
                    },
                ),
            ),
            neli.leads,
        )
        self._cfg = cfg
        self._neli = neli
        self.stats = stats
        self._window_s = cfg.relay.reorder_window_ms / 1000
        self._arbiters: dict[int, Arbiter[RawPrice]] = {}
        self._out = RelayOutput(
            cfg,
            member,
            raw_group_id(group),
            self._may_emit,
            stats=stats,
            telemetry=telemetry,
            producer_factory=clients.producer,
            parallel_commits=clients.producer is None,
        )
        self.standby = StandbyTail(
            broker.client_config(
                defaults=base,
                required={
                    "group.id": f"relay-standby-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "client.id": f"relay-{member}-standby",
                },
            ),
            cfg.topics.prices,
            cfg.topics.partitions,
            self._out.token,
            reader=clients.reader,
        )
        self._terms: dict[int, int] = {}  # partition -> offset of this member's takeover marker
        self._handovers = HandOvers(
            self.standby, self._out, neli, terms=self._terms, wanted=self.wanted, drop=self.drop
        )
        self._restarts = Restarts(
            self.standby,
            self._out,
            terms=self._terms,
            handing_over=self._handovers.__contains__,
            leads=neli.leads,
            drop=self.drop,
            resume=self._resume,
        )
        self._succession = Succession(cfg, self.standby, self._out, neli)
        self._paused: dict[int, float] = {}  # not led, no event yet: since (monotonic)
        self._first_price: dict[int, float] = {}  # taken up, nothing emitted yet: since when
        #: ``prices.raw`` partitions read ahead of their takeover (:mod:`.read_ahead`).
        self.read_ahead = ReadAhead(self.consumer, cfg.topics.raw)
        self._raw = RawInput(
            self.consumer,
            cfg.topics.raw,
            self.read_ahead,
            starting=self.starting,
            last_commit=self.last_commit,
        )
        self._next_tend = 0.0
        self._next_checkpoint = 0.0
        self._checkpointed: dict[int, int] = {}  # partition -> last price the last one covered

    def start(self) -> None:
        """Start the standby tail, then the worker thread."""
        self.standby.start()
        super().start()

    def stop(self) -> None:
        """Let hand-overs in progress finish (bounded by their bound), then stop."""
        deadline = time.monotonic() + self._handovers.bound_s + 1.0
        # (A revocation's hand-over may still be a queued command: the barrier did not wait.)
        while (self._handovers or self.commands_pending()) and time.monotonic() < deadline:
            time.sleep(0.01)
        super().stop()

    def _may_emit(self, partition: int) -> bool:
        """Whether a record may be produced to ``prices[partition]`` at this instant.

        Led (NELI says so now), or being handed over and the hand-over's rule allows it
        (:meth:`.handover.HandOvers.may_emit`): that rule decides even once NELI leads the
        partition again (given back), because the term this member emits under is the one
        from before the revocation, and somebody else may have taken one since.
        """
        if partition in self._restarts:
            return False  # its output failed: not until it has started over (.restart)
        if partition in self._handovers:
            # Not while NELI's stall guard holds this process off: a pause that stopped the
            # monotonic clock would leave the tail looking fresh while a successor's request
            # waits unread (a hand-over after FENCED is exactly that case).
            return not self._neli.recovering() and self._handovers.may_emit(partition)
        return self._neli.leads(partition)

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
        return partition in self._terms

    # -- ownership ----------------------------------------------------------------------------

    def assign(self, partition: int) -> None:
        """Take ``partition`` up (see :meth:`assign_many`)."""
        deferred = self.assign_many([partition])
        if partition in deferred:
            raise deferred[partition]

    def assign_many(self, partitions: list[int]) -> dict[int, TakeoverDeferredError]:
        """Take partitions up: takeover marker, the standby's marks up to it, then consume.

        What must hold before a partition is emitted on (a takeover marker acknowledged, the
        standby's marks just before it, no previous owner still emitting) is established by
        :meth:`.succession.Succession.establish`; a partition for which it cannot be yet is
        deferred and tried again. Then each partition taken up starts from those marks, and
        ``prices.raw[k]`` is consumed from the group's committed position.
        """
        t0 = time.monotonic()
        deferred: dict[int, TakeoverDeferredError] = {}
        for partition in partitions:
            if not self.standby.caught_up(partition):
                # A member that just joined is still reading prices[k]'s history. Writing the
                # marker now would stop an owner handing k over and leave k silent until the
                # read ends (growing with retention): the owner goes on until we are ready.
                deferred[partition] = TakeoverDeferredError(
                    "the standby tail is still reading the partition's history", retry_after_s=0.1
                )
        partitions = [p for p in partitions if p not in deferred]
        # Reading ahead from here lets the first fetch overlap the marker's round trip (a grace
        # period that NELI ended on evidence may have left no time for a probe and a read ahead).
        self._read_ahead([p for p in partitions if p in self.wanted])
        taken: list[int] = []
        for partition, snap in self._succession.establish(partitions, deferred):
            self._arbitrate_from(partition, snap.high)
            self._terms[partition] = snap.offset
            taken.append(partition)
            took = time.monotonic() - t0
            self._first_price[partition] = time.monotonic()
            self.stats.takeovers += 1
            self.stats.rebuild_s.append(took)
            log.info(
                "relay took partition %d (takeover marker at offset %d, ready in %.3f s)",
                partition,
                snap.offset,
                took,
            )
        if taken:
            self._raw.start_reading(taken)
        return deferred

    def tend(self) -> None:
        """Hand-overs and grace periods, looked at every ``_TEND_EVERY_S``.

        * A partition this member is handing over stops (flush, then release marker) once
          the successor has asked or the bound has passed; one NELI gives back to this member
          simply goes on (no takeover: nobody else emitted).
        * A partition in its grace period gets a probe (a control record: "I am next"), then
          is watched until the standby finds it *cleanly released* (the latest owner's release
          marker is the last word on ``prices[k]``: see :mod:`pricing_ha.dedupe.standby`).
          Nobody is then left who could append to it, so the grace period is ended
          (:meth:`neli.Neli.end_grace`) and the partition taken up at once. With the previous
          owner handing over, a planned move (SIGTERM, a member joining) costs the probe's and
          the release's round trips, not a rebalance plus S + T.
        """
        now = time.monotonic()
        if now < self._next_tend:
            return
        self._next_tend = now + _TEND_EVERY_S
        for partition, since in list(self._paused.items()):
            if partition not in self.active or self._may_emit(partition):
                del self._paused[partition]
                if partition in self.active:
                    log.info("partition %d resumed after %.2f s paused", partition, now - since)
            elif partition in self._handovers:
                # Handing over, tail momentarily stale: paused until it is fresh again or the
                # hand-over ends (HandOvers.tend), not dropped.
                continue
            elif now - since > _PAUSE_MAX_S:
                del self._paused[partition]
                self.drop(partition)
        self._restarts.tend()
        grace = self._neli.in_grace()
        self._handovers.tend(grace)
        self._tend_grace(grace)
        if now >= self._next_checkpoint:
            self._next_checkpoint = now + _CHECKPOINT_EVERY_S
            self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        """A checkpoint on each partition this member emits on, if prices came since the last.

        Only an owner writes them (in its transaction, with fencing), so they follow its
        prices and cost one small record per partition per interval.
        """
        for partition in list(self._checkpointed):
            if partition not in self._terms:
                del self._checkpointed[partition]
        for partition in sorted(self._terms):
            if not self._may_emit(partition):
                continue
            got = self.standby.checkpoint(partition, self._checkpointed.get(partition, -1))
            if got is not None:
                view, last_data = got
                self._out.checkpoint(partition, view)
                self._checkpointed[partition] = last_data

    def _tend_grace(self, grace: frozenset[int]) -> None:
        """Probe partitions in their grace period, read them ahead, end the grace periods
        that a clean release allows (:mod:`.succession`)."""

        def of_interest(partition: int) -> bool:
            return partition in grace or partition in self.wanted or self._neli.leads(partition)

        probed = self._succession.probe(
            grace, set(self._terms), self._handovers.partitions(), of_interest
        )
        if probed:
            self._read_ahead(probed)
        self.read_ahead.tend(of_interest)
        self._succession.end_graces()

    def _read_ahead(self, partitions: list[int]) -> None:
        """Read partitions in their grace period ahead (:mod:`.read_ahead`), unless already."""
        self._raw.read_ahead(
            [p for p in partitions if p not in self.read_ahead and p not in self._arbiters]
        )

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
        failed = self._out.flush(self._arbiters)
        lasted = self._handovers.end(partition)
        if lasted is not None:
            log.info("partition %d handed over after %.2f s", partition, lasted)
        self._paused.pop(partition, None)
        self._first_price.pop(partition, None)
        term = self._terms.pop(partition, None)
        if self._restarts.end(partition):
            failed.add(partition)  # its output failed earlier: it is not released
        if partition not in failed and term is not None:
            released = self._out.write_markers(
                [partition], RELEASE, MARKER_TIMEOUT_S, terms={partition: term}
            )
            if partition not in released:
                log.warning("partition %d: the release marker was not acknowledged", partition)
        self._out.mark_failed(failed - {partition})  # handled by the next batch
        self.commit_async([], now=True)  # what was held back for a partition starting
        self._raw.stop(partition)
        self._out.report(self._arbiters)
        self._arbiters.pop(partition, None)
        self._out.forget(partition)

    def close_clients(self) -> None:
        """Flush output, then close the input consumer and the standby tail."""
        self._out.close()
        self.commit_async([], now=True)
        self.consumer.close()
        self.standby.close()

    def join_held(self) -> str | None:
        """Joining the relay group waits for the standby tail to catch up (unless it failed).

        A member that joined first had its partitions handed to it while it was still
        reading their history: it deferred each takeover, the owner's hand-over ran out
        meanwhile, and the partition went silent (the fault drill: up to 6.4 s on a loaded
        machine, where the catching up also slowed the owner until it fenced itself).
        """
        return None if self.standby.error is not None else self.standby.problem()

    def standby_problem(self) -> str | None:
        """Why the standby is not ready, or ``None`` (readiness)."""
        return self.standby.problem()

    def output_problem(self) -> str | None:
        """Why output to ``prices`` cannot be delivered now, or ``None`` (readiness)."""
        return self._out.problem

    def may_resume(self) -> bool:
        """Start failed partitions over only once a replaced producer's broker answers."""
        return self._out.may_resume()

    # -- the hot path -------------------------------------------------------------------------

    def process(self, batch: list[Message]) -> None:
        """Arbitrate a batch, emit, flush, commit what is safe to commit."""
        if self.read_ahead.reading():
            batch = self.read_ahead.batch(batch)
        now = time.monotonic()
        out = self._out
        last: dict[int, int] = {}
        lost: set[int] = set()
        paused: dict[int, int] = {}  # partition -> first offset not processed
        for msg in batch:
            partition, offset = msg.partition(), msg.offset()
            if msg.error() is not None or partition is None or offset is None:
                continue
            arbiter = self._arbiters.get(partition)
            if (
                arbiter is None
                or partition in lost
                or partition in paused
                or (self.read_ahead.skipping and self.read_ahead.skipped(partition, offset))
            ):
                continue
            if not self._may_emit(partition):
                paused[partition] = offset  # read again once it is clear what happens to it
                continue
            raw_headers = msg.headers()
            try:
                instrument, seq, source, source_ns, publish_ns = parse_raw_record(msg, raw_headers)
            except InvalidPriceError as exc:
                out.dead_letter(msg, partition, offset, exc.reason)
                last[partition] = offset
                continue
            item = RawPrice(
                offset,
                as_bytes(msg.key()),
                as_bytes(msg.value()),
                header_list(raw_headers),
                source_ns,
                publish_ns,
            )
            parent = sampled_context(raw_headers)
            if parent is None:  # the common case: no span objects at all
                ok = out.emit(partition, arbiter.offer(instrument, seq, item, source, now))
            else:
                what = (instrument, seq, source)
                ok = out.offer_traced(arbiter, partition, item, what, parent=parent, now=now)
            if not ok:
                lost.add(partition)
                continue
            last[partition] = offset
            if self._first_price:
                self._log_first_price(partition)
        self._expire(now, lost)
        failed = out.flush(self._arbiters)
        self._commit(last, lost | failed)
        self._pause(paused, lost | failed)
        self._output_failed(failed | self._stopped_unasked(lost))

    def _stopped_unasked(self, lost: set[int]) -> set[int]:
        """Of the partitions whose emitting stopped in the middle of a batch, those still to
        be started over: not one being handed over whose successor has just asked for it.

        Nothing failed there: what went out is flushed like any output, what did not is not
        committed, so the successor re-reads it. Such a partition is released as usual
        (:meth:`unassign`). Counted as failed output, it started over in place and was never
        released, so its successor waited out its whole wait for a release (seen in the
        takeover benchmark whenever the request arrived while a batch was being emitted).
        """
        return {p for p in lost if not self._handovers.asked(p)}

    def _output_failed(self, partitions: set[int]) -> None:
        """Output to ``partitions`` was not acknowledged: start each over (new high-water marks
        from ``prices``, ``prices.raw`` re-read from the last commit). One still led is dropped
        and taken up again; one being handed over starts over in place (:mod:`.restart`)."""
        for partition in self._restarts.failed(partitions & self.active):
            self.drop(partition)

    def _resume(self, partition: int, high: dict[str, int]) -> bool:
        """Start ``partition`` over in place from ``high`` (:mod:`.restart`): a new arbiter, and
        ``prices.raw[k]`` re-read from the last commit this member made (or the group's)."""
        if not self._raw.restart(partition):
            return False  # not known now: tried again
        self._arbitrate_from(partition, high)
        return True

    def _arbitrate_from(self, partition: int, high: dict[str, int]) -> None:
        """A fresh arbiter for ``partition`` that starts from the high-water marks ``high``."""
        arbiter: Arbiter[RawPrice] = Arbiter(self._window_s)
        for instrument, seq in high.items():
            arbiter.set_high_water(instrument, seq)
        self._arbiters[partition] = arbiter
        self._out.track(partition, arbiter)

    def _log_first_price(self, partition: int) -> None:
        """Log how long after its takeover a partition's first ``prices.raw`` record was
        processed (an operator reading a silence on ``prices`` wants to know which step it was
        in). Its first price goes out no earlier: that record may be a copy already emitted."""
        since = self._first_price.pop(partition, None)
        if since is not None:
            log.info(
                "partition %d: first prices.raw record processed %.3f s after the takeover",
                partition,
                time.monotonic() - since,
            )

    def idle(self) -> None:
        """Release records whose reorder window has passed, even with no new input."""
        if self.read_ahead.replaying:
            self.process([])
            return
        lost: set[int] = set()
        self._expire(time.monotonic(), lost)
        self._output_failed(self._stopped_unasked(lost) | self._out.poll(self._arbiters))

    def _expire(self, now: float, lost: set[int]) -> None:
        for partition, arbiter in list(self._arbiters.items()):
            if partition in lost or not self._may_emit(partition):
                continue  # paused: expired later, or dropped
            if not self._out.emit(partition, arbiter.expire(now)):
                lost.add(partition)

    def _pause(self, paused: dict[int, int], lost: set[int]) -> None:
        """Rewind partitions that stopped being led mid-batch to their first unread record.

        Leadership ends (NELI answers no) a moment before the event that says why arrives:
        a planned revocation is then handed over (:meth:`hand_over`), so its input must not be
        thrown away; FENCED or a lost session unassigns it. Until then it is only paused, and
        :meth:`tend` drops it if nothing has come after ``_PAUSE_MAX_S``.
        """
        for partition, offset in paused.items():
            if partition in lost:
                continue
            if not self._raw.rewind(partition, offset):
                self.drop(partition)  # re-read from the last commit instead
                continue
            if partition not in self._paused:
                self._paused[partition] = time.monotonic()
                log.info(
                    "partition %d paused: %s",
                    partition,
                    "handing over, the standby tail has not read it to its end lately"
                    if partition in self._handovers
                    else "no longer led",
                )

    def _commit(self, last: dict[int, int], lost: set[int]) -> None:
        commits = self._raw.commits(last, self._arbiters, lost)
        if commits:
            self.commit_async(commits)
