"""What the broker-fault benchmark measures on a three-node cluster: tails, probe, faults.

* :class:`PricesArrivals` follows ``prices`` ``read_committed`` (as subscribers read it) and
  keeps, per instrument, when each new seq *arrived* at this reader (monotonic), and per
  partition every price's (offset, producer timestamp, ``relay`` header) and every control
  record, for the zombie check.
* :class:`Probe` is the cluster's own recovery, the reference each silence is held against: a
  plain ``acks=all`` idempotent producer writing 8 keys at 200 records/s to a topic of its own
  (replication factor 3, ``min.insync.replicas`` 2, as ``prices``), followed by a
  ``read_committed`` consumer that keeps each key's arrival times.
* :func:`longest_silence` is the longest wait between consecutive arrivals of one key (an
  instrument, a probe key) that ends in a window, or that the window ends still waiting.

Silences are measured on arrival at a reader, never on record timestamps: a producer stamps a
record when ``produce()`` is called, so a record buffered through a leader's loss carries a
timestamp from before the loss, and a silence measured on timestamps would hide the very wait
a subscriber sees.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
import time
from typing import Any

from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pricing_ha.kafka.headers import CONTROL_HEADER, header_dict, is_control
from pricing_ha.local.seqs import value_seq
from pricing_ha.local.tails import TopicTail

Rec = tuple[int, int, str]  # a price: offset, timestamp ms, relay
Ctl = tuple[int, int, str, str]  # a control record: offset, timestamp ms, relay, kind
PROBE_KEYS = 8
PROBE_RATE_HZ = 200.0


class PricesArrivals:
    """Follows ``prices`` from the beginning (see the module docstring)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        """Start following."""
        self.arrivals: dict[str, list[float]] = {}
        self.records: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
        self.controls: dict[int, list[Ctl]] = {p: [] for p in range(partitions)}
        self._last: dict[str, int] = {}
        self._tail = TopicTail(
            bootstrap, [topic], partitions, self._keep, on_control=self._control, name="prices"
        )

    def _keep(self, batch: list[Message], received: float) -> None:
        for msg in batch:
            key, value = msg.key(), msg.value()
            seq = value_seq(key, value if isinstance(value, bytes) else None)
            if key is None or seq is None:
                continue
            p = msg.partition() or 0
            relay = header_dict(msg.headers()).get("relay", "")
            self.records[p].append((msg.offset() or 0, msg.timestamp()[1], relay))
            instrument = key.decode() if isinstance(key, bytes) else key
            if seq > self._last.get(instrument, 0):
                self._last[instrument] = seq
                self.arrivals.setdefault(instrument, []).append(received)

    def _control(self, batch: list[Message]) -> None:
        for msg in batch:
            if not is_control(msg.key(), msg.headers()):
                continue
            values = header_dict(msg.headers())
            self.controls[msg.partition() or 0].append(
                (
                    msg.offset() or 0,
                    msg.timestamp()[1],
                    values.get("relay", ""),
                    values.get(CONTROL_HEADER, ""),
                )
            )

    def close(self) -> None:
        """Stop following."""
        self._tail.close()


class Probe:
    """The reference: a plain producer and a ``read_committed`` consumer on a topic of its own."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, settings: dict[str, Any]
    ) -> None:
        """Create the topic (RF 3, min ISR 2) and start producing and following it;
        ``settings`` are the producer's (the pipeline's own client settings: the same
        timeouts and retries as its producers), to which ``acks=all`` and idempotence are
        added."""
        admin = AdminClient({"bootstrap.servers": bootstrap})
        config = {"min.insync.replicas": "2"}
        admin.create_topics([NewTopic(topic, partitions, 3, config=config)])[topic].result(60)
        self.topic = topic
        self.arrivals: dict[str, list[float]] = {}
        self.failed = 0
        self._stop = threading.Event()
        self._producer = Producer(
            {
                **settings,
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "log.connection.close": False,
            }
        )
        self._thread = threading.Thread(target=self._produce, name="probe", daemon=True)
        self._thread.start()
        self._tail = TopicTail(bootstrap, [topic], partitions, self._keep, name="probe-tail")

    def _produce(self) -> None:
        interval = 1 / PROBE_RATE_HZ
        next_at = time.monotonic()
        i = 0
        while not self._stop.is_set():
            # A full queue while the cluster recovers is a silence too, not an error.
            with contextlib.suppress(BufferError):
                self._producer.produce(
                    self.topic, str(i).encode(), f"k{i % PROBE_KEYS}", on_delivery=self._delivered
                )
            self._producer.poll(0)
            i += 1
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))
        self._producer.flush(30)

    def _delivered(self, err: object, _msg: Message) -> None:
        if err is not None:
            self.failed += 1

    def _keep(self, batch: list[Message], received: float) -> None:
        for msg in batch:
            key = msg.key()
            name = key.decode() if isinstance(key, bytes) else str(key)
            self.arrivals.setdefault(name, []).append(received)

    def close(self) -> None:
        """Stop producing (flushing) and following."""
        self._stop.set()
        self._thread.join(60)
        self._tail.close()


def flowing(arrivals: dict[str, list[float]], within_s: float) -> bool:
    """Whether every key seen so far arrived again within the last ``within_s``."""
    now = time.monotonic()
    seen = list(arrivals.values())
    return bool(seen) and all(now - a[-1] <= within_s for a in seen if a)


def longest_silence(
    arrivals: dict[str, list[float]], lo: float, hi: float
) -> tuple[float, str | None, bool]:
    """The longest wait between consecutive arrivals of one key that overlaps ``[lo, hi]``
    (it ends at or after ``lo`` and begins at or before ``hi``), or that is still open at
    ``hi`` (nothing arrived after it: counted up to ``hi``).

    Returns:
        (seconds, the key, whether that wait was still open at ``hi``).
    """
    best: tuple[float, str | None, bool] = (0.0, None, False)
    for key, recorded in list(arrivals.items()):
        times = list(recorded)
        j = bisect.bisect_right(times, hi)  # times[:j] arrived by hi
        if j == 0:
            continue  # nothing of this key before hi: no silence of its to speak of
        for k in range(max(bisect.bisect_left(times, lo) - 1, 0), min(j, len(times) - 1)):
            gap = times[k + 1] - times[k]
            if gap > best[0]:
                best = (gap, key, False)
        if j == len(times) and hi - times[-1] > best[0]:
            best = (hi - times[-1], key, True)
    return (round(best[0], 3), best[1], best[2])
