"""What a relay member knows first-hand about its own terms: which it began, and when it last
produced to each partition.

A successor that finds ``prices[k]`` not released waits for the old owner's output to land or
expire, and its grace period runs in full (:mod:`.grace_period`, :mod:`.succession`): it cannot
know what another member still has in flight. When the latest term on ``prices[k]`` is one
this member began itself and has since ended (it handed the partition over, or let it go,
without a release: its output failed, or its release was not acknowledged), nothing needs
guessing. Everything it produced there was produced by this process, and lands or expires
within :func:`~.output_producers.outcome_known_after_s` of its ``produce()`` (the same bound
the waits for another member's output rest on). Once that has passed since its last record,
the term is as good as released: nobody is left who could append under it.

It happens after compound faults: a broker stall expires every session, the owner's output
fails while it hands over (no release), the member that asked for the partition is revoked
before it took it up (its release of the unbegun term names the term below it as the latest
again: :mod:`.control`), and the partition comes back to the member whose term that is. It
used to wait out a whole grace period and then the drain of its own output (T + 3.2 s on the
defaults), seen as 8.7 s of silence in a CI run of the broker-stall test.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

from pricing_ha.dedupe.control import Snapshot

__all__ = ["OwnTerms"]

_KEPT = 8  # terms remembered per partition


class OwnTerms:
    """The terms this member began, and whether one it ended has settled.

    Args:
        settle_s: from a record's ``produce()`` until it has landed or expired.
        last_produced: partition -> monotonic time this member last produced a price there
            (:attr:`.output.RelayOutput.last_produced`, read live).
        held: whether this member holds a term on a partition now (it may still emit).
    """

    def __init__(
        self,
        *,
        settle_s: float,
        last_produced: Mapping[int, float],
        held: Callable[[int], bool],
    ) -> None:
        """No term begun yet."""
        self._settle_s = settle_s
        self._last_produced = last_produced
        self._held = held
        self._began: dict[int, deque[int]] = {}

    def began(self, partition: int, term: int) -> None:
        """This member took ``partition`` up under the takeover marker at offset ``term``."""
        self._began.setdefault(partition, deque(maxlen=_KEPT)).append(term)

    def settled(self, partition: int, snap: Snapshot, marked_at: float) -> bool:
        """Whether the latest term below a marker of this member's (``snap``, the state just
        below it) is one this member began and has ended, with everything it produced to
        ``prices[partition]`` landed or expired before the marker was produced (``marked_at``:
        a monotonic time no later than that), so that nothing of that term lies above it.

        Only a term this member *began* counts: before taking one up it waited for the output
        of the term below. A marker of its own that never began (ended before it began, its
        release not read) proves nothing about the owner below it.
        """
        if not self.ended(partition, snap):
            return False
        last = self._last_produced.get(partition)
        return last is None or marked_at - last >= self._settle_s

    def ended(self, partition: int, snap: Snapshot) -> bool:
        """Whether the latest term in ``snap`` is one this member began and no longer holds."""
        return (
            snap.term >= 0
            and snap.term in self._began.get(partition, ())
            and not self._held(partition)
        )

    def settles_in(self, partition: int) -> float:
        """Seconds until everything this member produced to ``prices[partition]`` has landed
        or expired (0: already)."""
        last = self._last_produced.get(partition)
        return 0.0 if last is None else max(0.0, last + self._settle_s - time.monotonic())
