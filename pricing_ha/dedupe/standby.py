"""The relay's hot standby: every partition of ``prices``, tailed continuously.

A relay member keeps, for *every* partition of ``prices`` (owned or not), each instrument's
highest seq and the partition's last control records, by reading the topic as it grows. Taking a
partition over then costs a short read (from where the tail is to the new owner's takeover
marker), not a scan of the partition from its start: the cost does not grow with retention or
backlog, and a FENCED -> RESUMED flap with nothing changed costs nothing (the owner hands the
partition over on FENCED and goes on under its term when it is given back: :mod:`.handover`).

Control records on ``prices[k]`` (takeover, release, probe, checkpoint, reset, tick)
and the :class:`~.control.PartitionView` they fold into are described in :mod:`.control`.

**Starting from a checkpoint.** A member that opens its tail (a relay joining or restarting)
does not read ``prices`` from its start: it takes the view carried by the latest checkpoint
near each partition's end and reads on from that view's ``position`` (the search for those
checkpoints: :mod:`.checkpoint_search`). A partition without one is read from its start.

The tail captures a :class:`~.control.Snapshot` of a partition just before each of this
member's own control records (recognised by the ``marker`` header this member's token
starts), as it passes the record: what a takeover starts from.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from pricing_ha.dedupe.checkpoint_search import Reader, latest_checkpoints
from pricing_ha.dedupe.control import (
    CHECKPOINT,
    RESET,
    PartitionView,
    Snapshot,
    control_of,
    seq_of,
)

__all__ = ["StandbyTail"]

log = logging.getLogger("pricing_ha.relay")

_CAPTURES_KEPT = 64  # own markers remembered per partition (each is consumed at once)
_RESETS_KEPT = 256  # operators' mark resets queued per partition for its owner (rare records)


class StandbyTail:
    """Tails every partition of ``topic`` in a thread of its own (see the module docstring).

    Args:
        settings: the tail consumer's configuration (a throwaway group id; nothing committed).
        topic: ``prices``.
        partitions: the topic's partition count.
        token: the prefix of the ``marker`` header of this member's own control records.
        reader: builds the consumer (tests and the simulation pass a fake).
        resume: start each partition from its latest checkpoint (see the module docstring);
            ``False`` reads every partition from its start.
    """

    def __init__(
        self,
        settings: dict[str, Any],
        topic: str,
        partitions: int,
        token: str,
        *,
        reader: Callable[[dict[str, Any]], Reader] | None = None,
        resume: bool = True,
    ) -> None:
        """Create the tail; nothing is read until :meth:`start` (or :meth:`open`)."""
        self._resume = resume
        self._settings = {**settings, "enable.partition.eof": True}
        self._topic = topic
        self._token = token.encode()
        self._me = token
        self._make = reader or (lambda s: Consumer(s, logger=log))
        self._reader: Reader | None = None
        self.views = [PartitionView() for _ in range(partitions)]
        self._captures: list[dict[int, Snapshot]] = [{} for _ in range(partitions)]
        self._resets: list[deque[tuple[int, str]]] = [
            deque(maxlen=_RESETS_KEPT) for _ in range(partitions)
        ]
        # partition -> monotonic time the tail last read a record of it (the detector's input)
        self._seen = [float("-inf")] * partitions
        # partition -> the last price read (its timestamp is read only when asked for)
        self._last_price: list[Message | None] = [None] * partitions
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relay-standby", daemon=True)
        #: Records read, for the standby's cost (the checkpoint search included).
        self.records = 0
        #: Partitions started from a checkpoint when the tail opened: partition -> its position.
        self.resumed: dict[int, int] = {}
        self.error: BaseException | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Create the consumer; assign every partition from its latest checkpoint (when
        resuming and one is found), else from its start."""
        starts = self._from_checkpoints() if self._resume else {}
        reader = self._make(self._settings)
        reader.assign(
            [
                TopicPartition(self._topic, p, starts.get(p, OFFSET_BEGINNING))
                for p in range(len(self.views))
            ]
        )
        self._reader = reader

    def start(self) -> None:
        """Open and tail, in the background (the checkpoint search may take a few reads)."""
        self._thread.start()

    def close(self) -> None:
        """Stop tailing and close the consumer."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _run(self) -> None:
        try:
            self.open()
            while not self._stop.is_set():
                self.step(0.05)
        except BaseException as exc:
            self.error = exc
            log.exception("the standby tail of %s failed", self._topic)
            with self._changed:
                self._changed.notify_all()

    # -- the checkpoint search ----------------------------------------------------------------

    def _from_checkpoints(self) -> dict[int, int]:
        """Find each partition's latest checkpoint (:mod:`.checkpoint_search`); adopt its view;
        return where to read on."""
        started = time.monotonic()
        found = latest_checkpoints(
            self._make,
            self._settings,
            self._topic,
            len(self.views),
            stop=self._stop,
            counted=self._counted,
        )
        with self._changed:
            for p, view in found.items():
                self.views[p] = view
                self.resumed[p] = view.position
        log.info(
            "standby of %s: partitions %s resume from checkpoints, the others are read from "
            "their start (the search read %d records in %.2f s)",
            self._topic,
            sorted(found),
            self.records,
            time.monotonic() - started,
        )
        return {p: view.position for p, view in found.items()}

    def _counted(self) -> None:
        """Count one record the checkpoint search read (part of the standby's cost)."""
        self.records += 1

    # -- reading ------------------------------------------------------------------------------

    def step(self, timeout_s: float) -> int:
        """Read one batch and apply it; returns how many records it held."""
        assert self._reader is not None, "open() first"
        # consume(n, timeout) waits for n records or the whole timeout: wait for one, then
        # take what has already arrived, so that a marker is seen as soon as it lands.
        batch = self._reader.consume(1, timeout_s)
        if not batch:
            return 0
        batch += self._reader.consume(999, 0)
        with self._changed:
            for msg in batch:
                self._apply(msg)
            self._changed.notify_all()
        return len(batch)

    def _apply(self, msg: Message) -> None:
        partition, offset = msg.partition(), msg.offset()
        if partition is None or not 0 <= partition < len(self.views):
            return
        view = self.views[partition]
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                view.at_end = True
                view.end_mono = time.monotonic()
            return
        if offset is None or offset < view.position:
            return  # read again after a reset: already applied
        self.records += 1
        view.position = offset + 1
        self._seen[partition] = time.monotonic()
        control = control_of(msg)
        if control is None:
            view.fold_price(offset, seq_of(msg))
            self._last_price[partition] = msg
            return
        kind, values = control
        if kind != CHECKPOINT:  # a checkpoint copies some member's view below it: nothing new
            ts_type, ts_ms = msg.timestamp()
            wall = -1.0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts_ms / 1000
            self._apply_control(partition, offset, kind, values, wall)

    def _apply_control(
        self, partition: int, offset: int, kind: bytes, values: dict[str, bytes], wall: float
    ) -> None:
        view = self.views[partition]
        marker = values.get("marker", b"")
        if marker.startswith(self._token):
            captures = self._captures[partition]
            captures[offset] = Snapshot(
                offset, dict(view.high), view.clean, view.term, view.term_wall
            )
            if len(captures) > _CAPTURES_KEPT:
                del captures[min(captures)]
        if kind == RESET:
            instrument = values.get("instrument", b"").decode(errors="replace")
            self._resets[partition].append((offset, instrument))
        view.fold_control(offset, kind, values, wall)

    # -- queries (any thread) -----------------------------------------------------------------

    def snapshot_at(self, partition: int, offset: int, timeout_s: float) -> Snapshot | None:
        """The state just before this member's control record at ``offset`` on ``partition``.

        Waits (up to ``timeout_s``) for the tail to read that far; ``None`` if it did not.
        """
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                snap = self._captures[partition].pop(offset, None)
                if snap is not None:
                    return snap
                left = deadline - time.monotonic()
                if left <= 0 or self.error is not None:
                    return None
                if self.views[partition].position > offset:
                    return None  # passed without recognising it: not ours
                self._changed.wait(min(left, 0.05))

    def resets_after(self, partition: int, offset: int) -> list[tuple[int, str]]:
        """The operators' mark resets read on ``partition`` since the last call, those above
        ``offset`` (offset, instrument), in order (:mod:`.mark_reset`)."""
        with self._changed:
            queued = self._resets[partition]
            if not queued:
                return []
            taken = [entry for entry in queued if entry[0] > offset]
            queued.clear()
            return taken

    def position(self, partition: int) -> int:
        """The next offset the tail will read on ``partition``."""
        with self._changed:
            return self.views[partition].position

    def clean_after(self, partition: int, offset: int) -> bool:
        """Whether the tail has read past ``offset`` and finds ``partition`` cleanly released."""
        with self._changed:
            view = self.views[partition]
            return view.position > offset and view.clean

    def unrequested_within(
        self,
        partition: int,
        offset: int,
        fresh_s: float,
        read_as_of: Callable[[int, int], float] | None = None,
    ) -> bool:
        """Nobody asked for ``partition`` after ``offset``, as of a read that saw everything
        appended to it until at most ``fresh_s`` ago (a stale tail could have missed the
        request: then ``False``).

        The tail knows it saw everything appended until the last time it reached the end (an
        end-of-partition event). While the partition is written continuously, those events can
        be rare (each new record moves the end on before the tail reaches it), so the owner may
        also pass
        ``read_as_of(partition, position)``: a monotonic time before which everything appended
        is below ``position`` (for instance, when the owner produced a record the broker put
        below it: every earlier request was appended before that record).
        """
        with self._changed:
            view = self.views[partition]
            fresh = view.end_mono
            if read_as_of is not None:
                fresh = max(fresh, read_as_of(partition, view.position))
            return not view.requested_after(offset, self._me) and time.monotonic() - fresh < fresh_s

    def last_record(self, partition: int) -> float:
        """When (monotonic) the tail last read a record of ``partition``, any kind
        (``-inf``: none since it started)."""
        return self._seen[partition]

    def last_price_wall(self, partition: int) -> float:
        """The timestamp (wall seconds, its producer's clock) of the last price the tail read
        on ``partition`` (``-inf``: none since it started, or not stamped)."""
        msg = self._last_price[partition]
        if msg is None:
            return float("-inf")
        ts_type, ts_ms = msg.timestamp()
        return float("-inf") if ts_type == TIMESTAMP_NOT_AVAILABLE else ts_ms / 1000

    def caught_up(self, partition: int) -> bool:
        """Whether the tail has reached the end of ``partition`` at least once (a member that
        just joined reads the partition's history first)."""
        with self._changed:
            return self.views[partition].at_end

    def held_by_other(self, partition: int) -> bool:
        """Whether the latest term on ``partition`` is another member's and it has not
        released it (as far as the tail has read)."""
        with self._changed:
            view = self.views[partition]
            if view.term < 0 or view.clean:
                return False
            return any(at == view.term and who != self._me for who, at in view.requests.items())

    def requested_after(self, partition: int, offset: int) -> bool:
        """Whether another member asked for ``partition`` (a probe or takeover marker) after
        ``offset``, as far as the tail has read."""
        with self._changed:
            return self.views[partition].requested_after(offset, self._me)

    def checkpoint(self, partition: int, since_data: int) -> tuple[bytes, int] | None:
        """The view of ``partition`` as a checkpoint record's value, and its ``last_data``;
        ``None`` unless the tail has read a price after offset ``since_data`` (nothing new to
        checkpoint) and reached the partition's end at least once."""
        with self._changed:
            view = self.views[partition]
            if not view.at_end or view.last_data <= since_data:
                return None
            return view.encode(), view.last_data

    def problem(self) -> str | None:
        """Why the standby is not ready (not yet at the end of every partition), or ``None``."""
        if self.error is not None:
            return f"the standby tail of {self._topic} failed: {self.error!r}"
        behind = [p for p, view in enumerate(self.views) if not view.at_end]
        if behind:
            return f"the standby tail of {self._topic} is catching up on partitions {behind}"
        return None
