"""The relay's hot path: a batch of ``prices.raw`` arbitrated, emitted, flushed and committed.

:class:`HotPath` does the work of :meth:`.relay_worker.RelayWorker.process` and
:meth:`~.relay_worker.RelayWorker.idle` for the partitions the worker has taken up, in the
worker thread:

* each record of a partition that may be emitted on at this instant is parsed
  (:mod:`.records`; a malformed one goes to the dead-letter topic) and offered to the
  partition's arbiter (:mod:`.arbitration`), and what the arbiter emits is produced
  (:mod:`.output`), a sampled record inside its spans. Records read ahead of a takeover
  (:mod:`.read_ahead`) come first;
* records whose reorder window has passed are released, also while no input comes; copies out
  of bounds that the other group did not confirm go to the dead-letter topic with the reason,
  and an operator's mark resets read by the standby tail are applied (:mod:`.mark_reset`);
* the batch's output is flushed, and input positions are committed once their output is
  acknowledged and nothing before them is still held (:meth:`.raw_input.RawInput.commits`).

And what happens to a partition the hot path cannot go on with:

* **no longer led** mid-batch (NELI answers no a moment before the event that says why):
  *paused*, rewound to its first record not processed, and read again once it may be emitted
  on; dropped if nothing has happened after ``_PAUSE_MAX_S``;
* **output failed** (no longer led when it was produced, or not acknowledged, e.g. with a
  producer replaced: :mod:`.output_producers`): started over, because a record that failed
  may be missing from ``prices[k]``. It is dropped: one still led is taken
  up again by a takeover (a new transactional producer, whose ``init_transactions`` also
  fences a record of the failed transaction still in flight), and one being handed over is
  left to its successor, which takes it over by fencing. Unless it stopped only because its
  successor has just asked for it: nothing failed there, and it is released as usual.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Set

from confluent_kafka import Message, TopicPartition
from opentelemetry import trace

from pricing_ha.config import MAX_INSTRUMENT_BYTES, LimitsConfig
from pricing_ha.dedupe.arbitration import Arbiter, Bounds
from pricing_ha.dedupe.output import RelayOutput
from pricing_ha.dedupe.raw_input import RawInput
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.records import RawPrice, as_bytes, parse_raw_price
from pricing_ha.publishing.epochs import describe
from pricing_ha.publishing.pricing import InvalidPriceError
from pricing_ha.telemetry.pricepath import sampled_parent
from pricing_ha.telemetry.ratelimited import RateLimitedWarnings

__all__ = ["HotPath"]

log = logging.getLogger("pricing_ha.relay")
_tracer = trace.get_tracer("pricing_ha.relay")

_PAUSE_MAX_S = 1.0  # a partition no longer led, with no event saying why, is dropped after this


class HotPath:
    """Arbitration, output and commits of the partitions worked on (see the module docstring).

    Args:
        out: the member's output of prices.
        raw: the member's ``prices.raw`` input (rewinds, commits).
        read_ahead: input read ahead of a takeover, replayed first.
        window_s: the arbiters' reorder window.
        bounds: the arbiters' bounds on unconfirmed copies (``None``: none).
        limits: ``[limits]``: instruments an arbiter admits (a price of a new instrument on a
            full partition is dead-lettered, never admitted by forgetting another
            instrument's mark: see :meth:`_refused`), and how often refusals are warned about.
        may_emit: whether a partition may be emitted on at this instant.
        handing_over: whether a partition is being handed over (a pause is logged as such).
        asked: whether a partition being handed over has been asked for by its successor.
        active: the partitions the worker works on (shared).
        drop: ends a partition's work (flush, release, stop reading).
        commit: commits input positions (asynchronously, as the worker does).
        resets: the operator's mark resets the standby tail read on a partition after an offset
            (:meth:`.standby.StandbyTail.resets_after`; :mod:`.mark_reset`).
    """

    def __init__(
        self,
        out: RelayOutput,
        raw: RawInput,
        read_ahead: ReadAhead,
        *,
        window_s: float,
        bounds: Bounds | None = None,
        may_emit: Callable[[int], bool],
        handing_over: Callable[[int], bool],
        asked: Callable[[int], bool],
        active: Set[int],
        drop: Callable[[int], None],
        commit: Callable[[list[TopicPartition]], None],
        limits: LimitsConfig | None = None,
        resets: Callable[[int, int], list[tuple[int, str]]] = lambda _p, _o: [],
    ) -> None:
        """Nothing is worked on yet."""
        limits = limits or LimitsConfig()
        self._max_instruments = limits.max_instruments_per_partition
        self._warnings = RateLimitedWarnings(log, limits.warn_interval_ms / 1000)
        self._out = out
        self._raw = raw
        self._read_ahead = read_ahead
        self._window_s = window_s
        self._bounds = bounds
        self._may_emit = may_emit
        self._handing_over = handing_over
        self._asked = asked
        self._active = active
        self._drop = drop
        self._commit_async = commit
        self._resets = resets
        self._marks_at: dict[int, int] = {}  # partition -> offset its marks were taken below
        #: The arbiter of each partition worked on.
        self.arbiters: dict[int, Arbiter[RawPrice]] = {}
        self._paused: dict[int, float] = {}  # not led, no event yet: since (monotonic)
        self._first_price: dict[int, float] = {}  # taken up, nothing emitted yet: since when
        # partition -> last offset processed, whose commit waits for a dead letter to settle
        self._held_back: dict[int, int] = {}

    def take_up(self, partition: int, high: dict[str, int], since: int = -1) -> None:
        """``partition`` was taken over from the high-water marks ``high`` (those below offset
        ``since`` of ``prices``: later resets still apply); its first record processed is
        logged."""
        arbiter: Arbiter[RawPrice] = Arbiter(self._window_s, self._bounds)
        for instrument, seq in high.items():
            arbiter.set_high_water(instrument, seq)
        self.arbiters[partition] = arbiter
        self._marks_at[partition] = since
        self._held_back.pop(partition, None)
        self._out.track(partition, arbiter)
        self._first_price[partition] = time.monotonic()

    def forget(self, partition: int) -> None:
        """``partition`` is no longer worked on."""
        self._paused.pop(partition, None)
        self._first_price.pop(partition, None)
        self._held_back.pop(partition, None)
        self.arbiters.pop(partition, None)
        self._marks_at.pop(partition, None)

    def process(self, batch: list[Message]) -> None:
        """Arbitrate a batch, emit, flush, commit what is safe to commit."""
        read_ahead = self._read_ahead
        if read_ahead.reading():
            batch = read_ahead.batch(batch)
        now = time.monotonic()
        out = self._out
        last: dict[int, int] = {}
        lost: set[int] = set()
        paused: dict[int, int] = {}  # partition -> first offset not processed
        for msg in batch:
            partition, offset = msg.partition(), msg.offset()
            if msg.error() is not None or partition is None or offset is None:
                continue
            arbiter = self.arbiters.get(partition)
            if (
                arbiter is None
                or partition in lost
                or partition in paused
                or (read_ahead.skipping and read_ahead.skipped(partition, offset))
            ):
                continue
            if not self._may_emit(partition):
                paused[partition] = offset  # read again once it is clear what happens to it
                continue
            raw_headers = msg.headers()
            try:
                instrument, price, source, publish_ns, traceparent = parse_raw_price(
                    msg, raw_headers
                )
            except InvalidPriceError as exc:
                out.dead_letter(msg, partition, offset, exc.reason)
                last[partition] = offset
                continue
            if not arbiter.knows(instrument):
                refused = self._refused(partition, instrument, arbiter)
                if refused is not None:
                    out.dead_letter(msg, partition, offset, refused)
                    last[partition] = offset
                    continue
            # Its value and headers on prices are built only if it is emitted (RawPrice).
            item = RawPrice(
                offset,
                as_bytes(msg.key()),
                price,
                raw_headers,
                price.source_time_ns,
                publish_ns,
            )
            parent = sampled_parent(traceparent)
            if parent is None:  # the common case: no span objects at all
                emissions = arbiter.offer(
                    instrument, price.seq, item, source, now, epoch=price.epoch
                )
                ok = out.emit(partition, emissions)
            else:
                what = (instrument, price.seq, source, price.epoch)
                ok = out.offer_traced(arbiter, partition, item, what, parent=parent, now=now)
            if not ok:
                lost.add(partition)
                continue
            last[partition] = offset
            if self._first_price:
                self._log_first_price(partition)
        self._expire(now, lost)
        failed = out.flush(self.arbiters)
        self._commit(last, lost | failed)
        self._pause(paused, lost | failed)
        self._output_failed(failed | self._stopped_unasked(lost))

    def _refused(self, partition: int, instrument: str, arbiter: Arbiter[RawPrice]) -> str | None:
        """Why a price of ``instrument``, new to ``partition``'s arbiter, is not admitted (its
        dead-letter reason), or ``None`` if it is.

        The partition is full at ``max_instruments``. No mark is ever forgotten to make room:
        a mark is all that stops a late copy of an old seq from being emitted again, and
        copies can come arbitrarily late (a publishing group resuming from its committed
        positions after a long outage re-sends everything since). The new instrument is
        refused instead, loudly: dead-lettered with the reason, counted, and warned about
        (rate-limited). Its name's length is bounded too (``MAX_INSTRUMENT_BYTES``), so a
        checkpoint's size is.
        """
        if len(instrument.encode()) > MAX_INSTRUMENT_BYTES:
            reason = f"instrument name longer than {MAX_INSTRUMENT_BYTES} bytes"
        elif arbiter.instrument_count() >= self._max_instruments:
            reason = (
                f"instrument limit: partition {partition} already has {self._max_instruments} "
                "instruments (limits.max_instruments_per_partition)"
            )
        else:
            return None
        self._out.stats.instruments_refused += 1
        self._warnings.warn(
            "instrument refused",
            "a new instrument on prices.raw[%d] refused: %s",
            partition,
            reason,
        )
        return reason

    def idle(self) -> None:
        """Release records whose reorder window has passed, even with no new input."""
        if self._read_ahead.replaying or self._dead_letters_settled():
            self.process([])  # an empty batch: flushes, then commits what may be committed
            return
        lost: set[int] = set()
        self._expire(time.monotonic(), lost)
        self._output_failed(self._stopped_unasked(lost) | self._out.poll(self.arbiters))

    def tend(self, now: float) -> None:
        """Paused partitions: resumed once they may be emitted on again, or dropped after
        ``_PAUSE_MAX_S`` (one being handed over stays paused until its hand-over ends)."""
        for partition, since in list(self._paused.items()):
            if partition not in self._active or self._may_emit(partition):
                del self._paused[partition]
                if partition in self._active:
                    log.info("partition %d resumed after %.2f s paused", partition, now - since)
            elif self._handing_over(partition):
                # Handing over, tail momentarily stale: paused until it is fresh again or the
                # hand-over ends (HandOvers.tend), not dropped.
                continue
            elif now - since > _PAUSE_MAX_S:
                del self._paused[partition]
                self._drop(partition)

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

    def _reset_marks(self, partition: int, arbiter: Arbiter[RawPrice]) -> None:
        """Apply the operator's resets read on ``prices[partition]`` above the offset this
        arbiter's marks were taken below (:mod:`.mark_reset`), each logged and traced."""
        for offset, instrument in self._resets(partition, self._marks_at.get(partition, -1)):
            self._marks_at[partition] = offset
            mark = arbiter.reset_mark(instrument)
            self._out.stats.marks_reset += 1
            shown = "none" if mark is None else describe(mark)
            log.warning(
                "mark of %s on partition %d reset by an operator (prices offset %d; was %s)",
                instrument,
                partition,
                offset,
                shown,
            )
            _tracer.start_span(
                f"relay.reset-mark {instrument}",
                attributes={
                    "pricing_ha.instrument": instrument,
                    "pricing_ha.mark_before": shown,
                    "messaging.destination.partition.id": str(partition),
                    "messaging.kafka.offset": offset,
                },
            ).end()

    def _expire(self, now: float, lost: set[int]) -> None:
        for partition, arbiter in list(self.arbiters.items()):
            if partition in lost or not self._may_emit(partition):
                continue  # paused: expired later, or dropped
            self._reset_marks(partition, arbiter)
            if not self._out.emit(partition, arbiter.expire(now)):
                lost.add(partition)
            for item, reason in arbiter.take_rejected():
                # Out of bounds and not confirmed by the other group: it must not move the
                # instrument's mark (docs/architecture.md, "Sequence epochs").
                self._out.reject(partition, item, reason)
                self._warnings.warn("unconfirmed", "dead-lettered from prices.raw: %s", reason)

    def _pause(self, paused: dict[int, int], lost: set[int]) -> None:
        """Rewind partitions that stopped being led mid-batch to their first unread record.

        Leadership ends (NELI answers no) a moment before the event that says why arrives:
        a planned revocation is then handed over (:meth:`.relay_worker.RelayWorker.hand_over`),
        so its input must not be thrown away; FENCED or a lost session unassigns it. Until then
        it is only paused, and :meth:`tend` drops it if nothing has come after ``_PAUSE_MAX_S``.
        """
        for partition, offset in paused.items():
            if partition in lost:
                continue
            if not self._raw.rewind(partition, offset):
                self._drop(partition)  # re-read from the last commit instead
                continue
            if partition not in self._paused:
                self._paused[partition] = time.monotonic()
                log.info(
                    "partition %d paused: %s",
                    partition,
                    "handing over, the standby tail has not read it to its end lately"
                    if self._handing_over(partition)
                    else "no longer led",
                )

    def _stopped_unasked(self, lost: set[int]) -> set[int]:
        """Of the partitions whose emitting stopped in the middle of a batch, those still to
        be started over: not one being handed over whose successor has just asked for it.

        Nothing failed there: what went out is flushed like any output, what did not is not
        committed, so the successor re-reads it. Such a partition is released as usual
        (:meth:`~.relay_worker.RelayWorker.unassign`), not dropped as failed output.
        """
        return {p for p in lost if not self._asked(p)}

    def _output_failed(self, partitions: set[int]) -> None:
        """Output to ``partitions`` was not acknowledged: drop each. One still led
        is taken up again (new high-water marks from ``prices``, ``prices.raw`` re-read from the
        last commit); one being handed over is left to its successor."""
        for partition in sorted(partitions & self._active):
            self._drop(partition)

    def _dead_letters_settled(self) -> bool:
        """Whether a position held back for a dead letter may be committed now."""
        for partition, offset in self._held_back.items():
            floor = self._out.commit_floor(partition)
            if floor is None or floor > offset:
                return True
        return False

    def _commit(self, last: dict[int, int], lost: set[int]) -> None:
        # Never past a record whose dead letter is not settled (delivered or given up): a
        # position held back for one is committed with the next batch once it is.
        for partition in list(self._held_back):
            offset = self._held_back.pop(partition)
            if partition in self.arbiters and partition not in lost:
                last.setdefault(partition, offset)
        for partition, offset in list(last.items()):
            if partition in lost:
                continue  # nothing committed: it starts over from its last commit
            floor = self._out.commit_floor(partition)
            if floor is not None and floor <= offset:
                self._held_back[partition] = offset
                last[partition] = floor - 1
        commits = self._raw.commits(last, self.arbiters, lost)
        if commits:
            self._commit_async(commits)
