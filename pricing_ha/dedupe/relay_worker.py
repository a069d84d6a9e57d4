"""The relay's partition worker: standby, takeover, hand-over, arbitration, output.

:class:`RelayWorker` does the Kafka work of one relay member (:mod:`pricing_ha.dedupe.relay`)
for the partitions NELI gives it, in the worker thread (:mod:`pricing_ha.member.worker`):

* **takeover** (:meth:`RelayWorker.assign_many`): a takeover marker on ``prices[k]``, the
  standby's high-water marks just before it (:mod:`pricing_ha.dedupe.standby`), then
  ``prices.raw[k]`` from the group's committed position;
* **grace periods and hand-overs** (:meth:`RelayWorker.tend`): a probe while in the grace
  period, ended early on a clean release; a planned revocation handed over
  (:meth:`RelayWorker.hand_over`) until the successor asks;
* **the hot path** (:meth:`RelayWorker.process`): arbitration (:mod:`.arbitration`), output
  (:mod:`.output`), commits once output is acknowledged and nothing earlier is held; a
  partition in its grace period is read ahead (:mod:`.read_ahead`), so its takeover starts
  from records in hand.

:class:`RelayClients` and :class:`LeadershipSource` are its seams: the relay simulation
(``tests/sim``) drives one with fake clients and a simulated group.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.arbitration import Arbiter
from pricing_ha.dedupe.output import RelayOutput, RelayStats
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.records import RawPrice, as_bytes, parse_raw_record
from pricing_ha.dedupe.standby import PROBE, RELEASE, TAKEOVER, Snapshot, StandbyTail
from pricing_ha.kafka.headers import header_list
from pricing_ha.member.worker import PartitionWorker, TakeoverDeferredError
from pricing_ha.publishing.pricing import InvalidPriceError
from pricing_ha.telemetry import Telemetry
from pricing_ha.telemetry.pricepath import sampled_context

__all__ = ["LeadershipSource", "RelayClients", "RelayWorker", "raw_group_id", "relay_group_id"]

log = logging.getLogger("pricing_ha.relay")

_MARKER_TIMEOUT_S = 5.0  # a takeover or release marker's acknowledgement
_COMMITTED_TIMEOUT_S = 2.0  # the raw group's committed offsets, asked at a takeover
_PROBE_TIMEOUT_S = 1.0  # a probe's acknowledgement, and the tail reaching it
_CATCH_UP_S = 5.0  # the standby tail reaching a takeover marker (else: deferred, retried)
_OWN_MARKERS_KEPT = 8  # this member's latest takeover markers per partition, remembered
_TEND_EVERY_S = 0.02  # how often hand-overs and grace periods are looked at
# A member handing a partition over emits only while its standby tail has read that partition
# to its end within this long (so it has seen any successor's request), and a successor that
# finds the partition not released waits this long (plus margin) after its own takeover marker
# before taking the end: by then the old owner has seen the marker and stopped.
_HANDOVER_FRESH_S = 1.0
_HANDOVER_MAX_S = 10.0  # a hand-over nobody asks for ends after this long
_TICK_EVERY_S = 0.25  # a hand-over with a stale tail writes a tick at most this often
# With fencing, a successor whose probe found the partition not released within this long
# ends its grace period and takes over: its init_transactions fences whoever still owns it.
# An owner handing over sees the probe and releases well within it (a tail read and a commit).
_FENCED_WAIT_S = 0.3
_PAUSE_MAX_S = 1.0  # a partition no longer led, with no event saying why, is dropped after this
# An owner appends a checkpoint of its standby view to each partition it emits on about this
# often (when prices arrived since): a member joining reads about this much of prices[k].
_CHECKPOINT_EVERY_S = 1.0


class LeadershipSource(Protocol):
    """What the relay worker asks NELI (:class:`neli.Neli`, or a fake)."""

    def leads(self, partition: int) -> bool:
        """Whether this member leads ``partition`` now."""

    def in_grace(self) -> frozenset[int]:
        """Assigned partitions still in their grace period."""

    def end_grace(self, partition: int) -> bool:
        """End ``partition``'s grace period (proof in hand)."""

    def recovering(self) -> bool:
        """Whether a stall holds this member off leading anything now."""

    def previous_holder_silent_s(self, partition: int) -> float | None:
        """Seconds since the previous holder's last heartbeat on ``partition``, if known."""

    def assigned_since(self, partition: int) -> float | None:
        """Wall time at which ``partition`` was assigned to this member, if it is."""


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
        # At most 64 KiB per fetch request, not only per partition. The records of one fetch
        # response are handed over partition by partition, and the embedded broker ignores
        # the per-partition limit: it fills a response from the partitions in request order
        # up to the request's limit (5 MiB at most). After a takeover, one partition's backlog
        # thus held back the first record of the others: 1.1-1.2 s per partition taken over
        # in the fault drill. With 64 KiB per request each response carries a slice of one
        # or a few partitions, and librdkafka starts each request one partition further on:
        # the partitions interleave (measured on the embedded broker: 4 partitions with a
        # backlog of 3,000 small batches each, first records at 0, 215, 430 and 645 instead of
        # 0, 3,000, 6,000 and 9,000). librdkafka wants message.max.bytes <= fetch.max.bytes;
        # a record batch larger than that is still returned whole. (librdkafka also prefetches
        # up to 100,000 records, so partitions taken up after others wait behind the earlier
        # ones' prefetched backlog: 2.2-2.9 s in the drill's broker stall. Lowering
        # queued.min.messages to 1,000 made the drill worse, 11-12 s in the relay windows and
        # 5.8 s in a publisher's: a partition whose queue is full is not fetched again for
        # fetch.queue.backoff.ms, 1 s by default. Left at the default.)
        base = {
            "fetch.wait.max.ms": 10,
            "log.connection.close": False,
            "max.partition.fetch.bytes": 65536,
            "fetch.max.bytes": 65536,
            "message.max.bytes": 65536,
        }
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
        # From a previous holder's last heartbeat until all it produced while it led has landed
        # or expired: T (it led at most that long after it), e (the heartbeat's timestamp is
        # its clock), S (its output's message.timeout.ms). See _unclean_wait.
        relay = cfg.relay
        self._output_expired_s = (
            relay.threshold_ms + relay.clock_skew_ms + max(500, relay.session_timeout_ms)
        ) / 1000
        self._skew_s = relay.clock_skew_ms / 1000
        #: Per partition, this member's latest takeover markers there (terms it began, or
        #: ended before they began), kept after the terms end.
        self._own_markers: dict[int, deque[int]] = {}
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
        self._probes: dict[int, int] = {}  # in their grace period: offset of this member's probe
        self._probe_acked: dict[int, float] = {}  # when that probe was acknowledged (monotonic)
        self._probe_at: dict[int, int] = {}  # and its offset (kept as long as _probe_acked)
        # partition -> where the tail was when this member first saw it in its grace period
        # (a probe's stand-in, for a member that could not probe: held off by a stall, or
        # its grace period ended on NELI's evidence before it could)
        self._asked_at: dict[int, int] = {}
        self._waived: set[int] = set()  # grace ended by a clean release: recheck at takeover
        self._handover: dict[int, float] = {}  # revoked, still emitting: until (monotonic)
        self._ticked: dict[int, float] = {}  # handing over, tail stale: last tick (monotonic)
        self._given_back: dict[int, float] = {}  # handing over, assigned again: since when
        self._paused: dict[int, float] = {}  # not led, no event yet: since (monotonic)
        self._first_price: dict[int, float] = {}  # taken up, nothing emitted yet: since when
        #: ``prices.raw`` partitions read ahead of their takeover (:mod:`.read_ahead`).
        self.read_ahead = ReadAhead(self.consumer, cfg.topics.raw)
        #: How long a revoked owner may go on emitting if no successor asks for the partition.
        self.handover_s = _HANDOVER_MAX_S
        self._next_tend = 0.0
        self._next_checkpoint = 0.0
        self._checkpointed: dict[int, int] = {}  # partition -> last price the last one covered

    def start(self) -> None:
        """Start the standby tail, then the worker thread."""
        self.standby.start()
        super().start()

    def stop(self) -> None:
        """Let hand-overs in progress finish (bounded by :attr:`handover_s`), then stop."""
        deadline = time.monotonic() + self.handover_s + 1.0
        # (A revocation's hand-over may still be a queued command: the barrier did not wait.)
        while (self._handover or self.commands_pending()) and time.monotonic() < deadline:
            time.sleep(0.01)
        super().stop()

    def _may_emit(self, partition: int) -> bool:
        """Whether a record may be produced to ``prices[partition]`` at this instant.

        Led (NELI says so now), or being handed over: revoked by a planned rebalance, no
        successor has asked for the partition yet (a probe or takeover marker on ``prices``
        after this member's own takeover marker), and the hand-over bound has not passed.
        A partition being handed over follows the hand-over's rule even once NELI leads it
        again (given back): the term this member emits under is the one from before the
        revocation, and somebody else may have taken one since (:meth:`_tend_handovers`).
        """
        until = self._handover.get(partition)
        if until is None:
            return self._neli.leads(partition)
        if time.monotonic() >= until:
            return False
        term = self._terms.get(partition)
        return (
            term is not None
            # Without fencing, only once the tail has read this member's announcement back: a
            # successor's marker below it is then seen, and one above it finds it (and waits).
            and (self._out.fencing or self.standby.announced(partition, term))
            and self.standby.unrequested_within(
                partition, term, _HANDOVER_FRESH_S, self._out.read_as_of
            )
        )

    def hand_over(self, partition: int) -> bool:
        """A planned revocation: keep emitting until the successor asks (see :meth:`tend`).

        The barrier returns at once and the rebalance goes on while this member keeps
        ``prices[k]`` flowing. The successor's probe or takeover marker stops it: it then
        flushes and writes its release marker, which the successor is waiting for. It emits
        only while its standby tail has read ``prices[k]`` to its end within
        ``_HANDOVER_FRESH_S``, so it sees a successor's marker within that long; a successor
        that did not find the partition released waits that long after its takeover marker
        (:meth:`assign_many`), so no record of this member can land after the point it
        starts from. A member that is stopping waits for its hand-overs before it closes.
        """
        term = self._terms.get(partition)
        if term is None:
            return False
        self._handover[partition] = time.monotonic() + self.handover_s
        if not self._out.fencing:
            self._out.announce(partition, term)
        log.info("handing partition %d over (emitting until the successor asks)", partition)
        return True

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

        For each k: write a takeover marker to ``prices[k]`` and wait for its acknowledgement
        (the end of ``prices[k]`` is then known by offset, not by asking the broker), take the
        high-water marks the standby tail had just before the marker (it reads every
        partition continuously, so this waits only for the short tail since its position),
        then consume ``prices.raw[k]`` from the group's committed position. A partition whose
        marker is not acknowledged, or that the tail does not reach in time, is deferred and
        tried again: never taken up on marks that might be incomplete.

        Where the marker finds ``prices[k]`` not released, its previous owner may be handing
        it over (:meth:`hand_over`) and still emitting: the marker is its signal to stop. Unless
        this member's probe was acknowledged over ``_HANDOVER_FRESH_S`` + 0.2 s earlier (the
        usual case after a grace period: the old owner has stopped since), the takeover waits
        until the release appears, at most that long, and then marks the end again, so that
        it starts after the old owner's last record.
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
        snaps = self._mark_ends(partitions, deferred)
        self._defer_late_terms(partitions, snaps, deferred)
        taken: list[int] = []
        waits = {
            p: wait
            for p, snap in snaps.items()
            # Fenced: the previous owner's producer can no longer append, nothing to wait for.
            if not snap.clean and not self._out.fencing and p not in self._waived
            if p not in deferred and (wait := self._unclean_wait(p, snap)) > 0
        }
        unclean = sorted(waits)
        now = time.monotonic()
        probe_age = {
            p: round(now - self._probe_acked.pop(p), 2)
            for p in partitions
            if p in self._probe_acked
        }
        if unclean:
            # The previous owner may be handing over: it stops within _HANDOVER_FRESH_S of
            # seeing our marker, then releases. Wait for that, then mark the end again.
            marks = {p: snaps[p].offset for p in unclean}
            log.info(
                "partitions %s not released: waiting up to %s s for a previous owner still "
                "handing over, or for its output to land or expire (probes acknowledged %s s "
                "ago)",
                unclean,
                {p: round(w, 2) for p, w in waits.items()},
                {p: probe_age.get(p) for p in unclean},
            )
            # Revoked meanwhile: stop waiting (the rebalance waits for this thread).
            self.standby.wait_clean(
                marks,
                max(waits.values()),
                give_up=lambda: not any(self._neli.leads(p) for p in unclean),
                terms={p: snaps[p].term for p in unclean if snaps[p].term >= 0},
            )
            snaps.update(self._mark_ends(unclean, deferred))
        for partition, snap in sorted(snaps.items()):
            if partition in deferred:
                continue
            if not self._neli.leads(partition):
                # Revoked while taking it up: this term ends before it began.
                deferred[partition] = self._end_unbegun(
                    partition, snap, "no longer led when the takeover was ready", 0.05
                )
                continue
            if partition in self._waived:
                self._waived.discard(partition)
                if not snap.clean and not self._out.fencing:
                    # Another term started between the probe and this marker: the grace
                    # period was not to be skipped after all. Wait it out, then start over.
                    deferred[partition] = TakeoverDeferredError(
                        "another owner appeared after the clean release",
                        retry_after_s=self._cfg.relay.threshold_ms / 1000,
                    )
                    continue
            arbiter: Arbiter[RawPrice] = Arbiter(self._window_s)
            for instrument, seq in snap.high.items():
                arbiter.set_high_water(instrument, seq)
            self._arbiters[partition] = arbiter
            self._terms[partition] = snap.offset
            self._out.track(partition, arbiter)
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
            self._start_reading(taken)
        return deferred

    def _defer_late_terms(
        self,
        partitions: list[int],
        snaps: dict[int, Snapshot],
        deferred: dict[int, TakeoverDeferredError],
    ) -> None:
        """Defer the takeovers whose marker finds a term another member began after this
        member asked for the partition (its probe, or where its tail was when it first saw
        the partition in its grace period), or after NELI assigned it the partition (by the
        marker's timestamp, within the clock skew e). Without fencing only.

        One of the two may be a zombie (its loss not yet noticed), and the other's term may
        have begun on a clean release that this member's probe did not count. Do not start a
        second term beside it: end ours before it began (our marker stops a member handing
        over, nothing more), wait a grace period and look again. Found by the relay simulation
        (three times: once with a probe, once for a member a stall had kept from probing, and
        once for a member whose worker did not run at all in its grace period, so it had
        noted nothing: the assignment time is the one record that cannot be missed).
        """
        probed = {p: self._probe_at.pop(p) for p in partitions if p in self._probe_at}
        for p in partitions:
            seen = self._asked_at.pop(p, None)
            if seen is not None:
                probed[p] = min(probed.get(p, seen), seen)
        for p, snap in snaps.items():
            if snap.clean or self._out.fencing:
                continue
            if snap.term > probed.get(p, snap.term) or self._term_after_assignment(p, snap):
                deferred[p] = self._end_unbegun(
                    p,
                    snap,
                    "another member started a term after this member asked for the partition",
                    retry_after_s=self._cfg.relay.threshold_ms / 1000,
                )

    def _term_after_assignment(self, partition: int, snap: Snapshot) -> bool:
        """Whether the latest term below ``snap`` is another member's, begun (its marker
        produced) after NELI assigned ``partition`` to this member, less the clock skew e; an
        unknown timestamp counts as after. A term of this member's own (a resume) does not."""
        if snap.term < 0 or snap.term in self._own_markers.get(partition, ()):
            return False
        since = self._neli.assigned_since(partition)
        if since is None:
            return False  # not assigned: not led either, the takeover ends anyway
        return snap.term_wall < 0 or snap.term_wall >= since - self._skew_s

    def _unclean_wait(self, partition: int, snap: Snapshot) -> float:
        """How long a takeover whose marker found ``partition`` not released waits for the
        release before it marks the end again (0: not at all). Without fencing only.

        * The latest term's owner announced a hand-over below the marker, or nothing is known
          of when it last led: it may be handing over, and stops within ``_HANDOVER_FRESH_S``
          of seeing the marker. Wait that long (plus margin) after this member's probe, unless
          the probe was acknowledged longer ago than that (it stopped then).
        * No announcement below the marker: the owner will not emit on k again (its tail reads
          the marker before its own announcement, and it emits in a hand-over only once it
          has read that back). What it produced while it still led may be in flight. It led
          at most T after its last heartbeat, which NELI says was sent ``silent`` ago (within
          e), and its output expires S after it was produced (``message.timeout.ms``): wait
          until T + e + S have passed since that heartbeat. After a crash that is under a
          second after the takeover's marker, instead of a whole grace period.
        """
        asked = time.monotonic() - _HANDOVER_FRESH_S - 0.2
        wait = _HANDOVER_FRESH_S + 0.2 if self._probe_acked.get(partition, asked) >= asked else 0.0
        if not snap.handing_over:
            silent = self._neli.previous_holder_silent_s(partition)
            if silent is not None:
                wait = max(0.0, self._output_expired_s - silent)
        return wait

    def _end_unbegun(
        self, partition: int, snap: Snapshot, why: str, retry_after_s: float
    ) -> TakeoverDeferredError:
        """End the term of the takeover marker ``snap`` was captured at before it began.

        The release says so, so that whoever is next need not wait out a grace period for
        it; but if an earlier term was still open below the marker, it says that too
        (``before`` = ``unclean``): that term's owner may still be emitting (it may be the
        member that took the partition from us), and a release of ours must not make the
        partition look released. Returns the deferral to record.
        """
        self._out.write_markers(
            [partition],
            RELEASE,
            _MARKER_TIMEOUT_S,
            terms={partition: snap.offset},
            unclean=() if snap.clean else (partition,),
        )
        self._waived.discard(partition)
        return TakeoverDeferredError(why, retry_after_s=retry_after_s)

    def _start_positions(self, taken: list[TopicPartition]) -> list[TopicPartition]:
        """Where each partition taken up starts: the raw group's committed offset, asked here.

        Assigned without an offset, librdkafka looks the committed offset up itself, but only
        while none of this consumer's commits is in flight and one assignment at a time; in the
        fault drill two of four partitions taken over processed their first record 4.2 and
        4.6 s after the takeover. Assigned at an offset, a partition is fetched at once.
        Starting earlier than the latest commit is harmless (the arbiter drops what the marks
        already cover), so a commit racing this query loses nothing; a query that fails
        leaves the lookup to librdkafka.
        """
        try:
            got = self.consumer.committed(taken, timeout=_COMMITTED_TIMEOUT_S)
        except KafkaException as exc:
            log.info("committed offsets of %s not known (%s): librdkafka looks them up", taken, exc)
            return taken
        out = []
        for tp in got:
            if tp.error is not None:
                out.append(TopicPartition(tp.topic, tp.partition, OFFSET_INVALID))
            else:  # no commit yet: from the beginning, as auto.offset.reset = earliest says
                out.append(
                    TopicPartition(
                        tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    )
                )
        return out

    def _mark_ends(
        self, partitions: list[int], deferred: dict[int, TakeoverDeferredError]
    ) -> dict[int, Snapshot]:
        """Write takeover markers and take the standby's state just before each one.

        Partitions whose marker was not acknowledged, or not reached by the tail in time, go
        to ``deferred`` (and are left out of the result).
        """
        ends = self._out.write_markers(partitions, TAKEOVER, timeout_s=_MARKER_TIMEOUT_S)
        for partition, offset in ends.items():
            self._own_markers.setdefault(partition, deque(maxlen=_OWN_MARKERS_KEPT)).append(offset)
        snaps: dict[int, Snapshot] = {}
        for partition in partitions:
            deferred.pop(partition, None)
            if partition not in ends:
                deferred[partition] = TakeoverDeferredError(
                    "the takeover marker was not acknowledged"
                )
                continue
            snap = self.standby.snapshot_at(partition, ends[partition], _CATCH_UP_S)
            if snap is None:
                deferred[partition] = TakeoverDeferredError(
                    f"the standby tail did not reach the takeover marker at offset "
                    f"{ends[partition]} within {_CATCH_UP_S:.0f} s",
                    retry_after_s=0.5,
                )
                continue
            snaps[partition] = snap
        return snaps

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
            elif partition in self._handover:
                # Handing over, tail momentarily stale: paused until it is fresh again or the
                # hand-over ends (_tend_handovers), not dropped.
                continue
            elif now - since > _PAUSE_MAX_S:
                del self._paused[partition]
                self.drop(partition)
        grace = self._neli.in_grace()
        self._tend_handovers(grace)
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

    def _tend_handovers(self, grace: frozenset[int]) -> None:
        for partition in list(self._given_back):
            if partition not in self._handover or partition not in self.wanted:
                del self._given_back[partition]
        for partition in list(self._handover):
            if partition in self.wanted:
                self._tend_given_back(partition)
            elif partition in grace and self._may_emit(partition):
                # Given back while still handing it over: nobody else has emitted since this
                # member's own term, so there is nobody to wait for.
                self._neli.end_grace(partition)
            elif self._handover_over(partition):
                self.drop(partition)  # flush, release
            elif not self._may_emit(partition):
                # The standby tail has not seen the end of k lately: the input waits, paused,
                # until it has. Dropping here would leave the partition silent until the
                # successor takes it up (seen in the fault drill: 12 s on a loaded machine).
                # A partition with nothing emitted lately gives the tail nothing of this
                # member's to read back, so it would stay "stale" until the end of the
                # hand-over (the fault drill, again): a tick gives it something.
                self._tick(partition)

    def _tend_given_back(self, partition: int) -> None:
        """A partition being handed over that NELI gave back to this member (an eager
        rebalance that left it here, or a later one).

        It goes on under its term, without a takeover, if nobody else began one since: the
        standby tail has read everything appended up to a moment after the partition came
        back, with no probe or takeover marker of another member after this member's term.
        Anyone who led the partition meanwhile wrote its marker while it led, which was before
        NELI gave the partition back. If somebody did, the partition is dropped and taken up
        afresh (a takeover: new marks, and the wait for its output in :meth:`assign_many`).
        Until the tail has read that far (a tick gives it something to read back), the
        hand-over's rule goes on deciding whether it may emit.
        """
        now = time.monotonic()
        since = self._given_back.setdefault(partition, now)
        term = self._terms.get(partition)
        if term is not None and self.standby.unrequested_within(
            partition, term, now - since, self._out.read_as_of
        ):
            del self._handover[partition]  # it goes on, led by NELI again
            del self._given_back[partition]
            self._ticked.pop(partition, None)
            if not self._out.fencing:
                # Its announcement no longer holds: a successor after a crash must not wait
                # for a release that only a member handing over writes.
                self._out.kept(partition, term)
        elif term is None or self.standby.requested_after(partition, term):
            del self._given_back[partition]
            log.info(
                "partition %d came back after another member's term: taken up afresh", partition
            )
            self.drop(partition)
        else:
            self._tick(partition)

    def _tick(self, partition: int) -> None:
        now = time.monotonic()
        if now - self._ticked.get(partition, float("-inf")) >= _TICK_EVERY_S:
            self._ticked[partition] = now
            self._out.tick(partition)

    def _handover_over(self, partition: int) -> bool:
        """A hand-over ends when the successor asked, or its bound passed."""
        until = self._handover.get(partition)
        term = self._terms.get(partition)
        return (
            until is None
            or time.monotonic() >= until
            or term is None
            or self.standby.requested_after(partition, term)
        )

    def _tend_grace(self, grace: frozenset[int]) -> None:
        for partition in list(self._probes):
            if partition not in grace:
                del self._probes[partition]

        def of_interest(partition: int) -> bool:
            return partition in grace or partition in self.wanted or self._neli.leads(partition)

        for partition in grace - set(self._terms):
            self._asked_at.setdefault(partition, self.standby.position(partition))
        for partition in [p for p in self._asked_at if not of_interest(p)]:
            del self._asked_at[partition]
        # Probes are kept while led: NELI ends the grace period before its ACQUIRED event
        # reaches this thread as an assign, and the takeover needs the probe's age (without
        # it, assign_many waits 1.2 s for a release a crashed owner never writes).
        for partition in [p for p in self._probe_acked if not of_interest(p)]:
            del self._probe_acked[partition]
            self._probe_at.pop(partition, None)
        # No probe before the tail has read the partition's history, nor while a stall holds
        # this member off (S + 0.5 s after it woke): either would end a hand-over that should
        # go on until this member can take over (see assign_many). Seen in the fault drill: a
        # relay woken from a pause probed at once and its partitions were silent for ~4 s.
        todo = sorted(
            p for p in grace - set(self._probes) - set(self._handover) if self.standby.caught_up(p)
        )
        if todo and self._neli.recovering():
            todo = []
        if todo:
            probes = self._out.write_markers(todo, PROBE, timeout_s=_PROBE_TIMEOUT_S)
            log.info("probed partitions in their grace period: %s", probes)
            self._probes.update(probes)
            acked = time.monotonic()
            self._probe_acked.update(dict.fromkeys(probes, acked))
            self._probe_at.update(probes)
            self._read_ahead(todo)
        self.read_ahead.tend(of_interest)
        now = time.monotonic()
        for partition, offset in sorted(self._probes.items()):
            if self.standby.clean_after(partition, offset) and self._neli.end_grace(partition):
                self._waived.add(partition)
                del self._probes[partition]
                log.info("partition %d was released cleanly: no grace period", partition)
            elif (
                self._out.fencing
                and now - self._probe_acked.get(partition, now) >= _FENCED_WAIT_S
                and self._neli.end_grace(partition)
            ):
                # Not released (its owner crashed, or is cut off): the takeover fences it.
                del self._probes[partition]
                log.info("partition %d was not released: taken over by fencing", partition)

    def _read_ahead(self, partitions: list[int]) -> None:
        """Start reading ``prices.raw[k]`` ahead for partitions in their grace period, from the
        committed offset as it stands now (:mod:`.read_ahead`)."""
        todo = [p for p in partitions if p not in self.read_ahead and p not in self._arbiters]
        if not todo:
            return
        raw = self._cfg.topics.raw
        self.read_ahead.start(
            self._start_positions([TopicPartition(raw, p, OFFSET_INVALID) for p in todo])
        )
        self.starting(todo)

    def _start_reading(self, partitions: list[int]) -> None:
        """Partitions just taken up: their ``prices.raw`` goes to the hot path.

        One read ahead starts with what was kept, from the raw group's committed offset as it
        stands now, after the takeover marker (why: :mod:`.read_ahead`); if that offset is not
        known, the read ahead is given up. The others are assigned at the committed offset
        (:meth:`_start_positions`), in one call.
        """
        raw = self._cfg.topics.raw
        ahead = [p for p in partitions if p in self.read_ahead]
        plain = [TopicPartition(raw, p, OFFSET_INVALID) for p in partitions if p not in ahead]
        if ahead:
            try:
                got = self.consumer.committed(
                    [TopicPartition(raw, p) for p in ahead], timeout=_COMMITTED_TIMEOUT_S
                )
            except KafkaException as exc:
                log.info("committed offsets of %s not known (%s): read again", ahead, exc)
                got = []
            known = {tp.partition: tp.offset for tp in got if tp.error is None}
            for partition in ahead:
                if partition not in known:
                    self.read_ahead.stop(partition)
                    plain.append(TopicPartition(raw, partition, OFFSET_INVALID))
                    continue
                count, first = self.read_ahead.take(partition, known[partition])
                log.info(
                    "partition %d: %d records read ahead (from offset %s), taken from the "
                    "committed offset %d",
                    partition,
                    count,
                    "-" if first is None else first,
                    known[partition],
                )
        if plain:
            self.consumer.incremental_assign(self._start_positions(plain))
            self.starting([tp.partition for tp in plain])

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
        until = self._handover.pop(partition, None)
        self._ticked.pop(partition, None)
        if until is not None:
            log.info(
                "partition %d handed over after %.2f s",
                partition,
                time.monotonic() - until + self.handover_s,
            )
        self._paused.pop(partition, None)
        self._first_price.pop(partition, None)
        term = self._terms.pop(partition, None)
        if partition not in failed and term is not None:
            released = self._out.write_markers(
                [partition], RELEASE, _MARKER_TIMEOUT_S, terms={partition: term}
            )
            if partition not in released:
                log.warning("partition %d: the release marker was not acknowledged", partition)
        self._out.mark_failed(failed - {partition})  # handled by the next batch
        self.commit_async([], now=True)  # what was held back for a partition starting
        raw = TopicPartition(self._cfg.topics.raw, partition)
        self.consumer.incremental_unassign([raw])
        self.read_ahead.forget(partition)
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
        for partition in failed:
            # Output was not acknowledged: start the partition over (rebuild the high-water
            # marks from prices, re-read prices.raw from the last commit) while still leading.
            self.drop(partition)

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
        for partition in lost | self._out.poll(self._arbiters):
            self.drop(partition)

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
            try:
                self.consumer.seek(TopicPartition(self._cfg.topics.raw, partition, offset))
            except KafkaException:
                self.drop(partition)  # re-read from the last commit instead
                continue
            if partition not in self._paused:
                self._paused[partition] = time.monotonic()
                log.info(
                    "partition %d paused: %s",
                    partition,
                    "handing over, the standby tail has not read it to its end lately"
                    if partition in self._handover
                    else "no longer led",
                )

    def _commit(self, last: dict[int, int], lost: set[int]) -> None:
        commits = []
        for partition, offset in last.items():
            arbiter = self._arbiters.get(partition)
            if partition in lost or arbiter is None:
                continue  # the next owner re-reads from the previous commit: nothing is lost
            held = [item.offset for item in arbiter.held()]
            upto = min([offset + 1, *held])
            commits.append(TopicPartition(self._cfg.topics.raw, partition, upto))
        if commits:
            self.commit_async(commits)
        for partition in lost:
            self.drop(partition)
