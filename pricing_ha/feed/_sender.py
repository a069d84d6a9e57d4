"""The feed's producer, every quote it has not yet seen acknowledged, and its run summary
(for :mod:`.producer`, which exports the public names).

Per quote the feed encodes once, produces once and keeps one :class:`_Pending` entry until the
broker acknowledges it. The entry is itself the quote's delivery callback (no closure per
quote); a copy sent again after a producer replacement gets a small :class:`_Copy` callback
instead, carrying that copy's number. Callbacks are served once per :data:`POLL_EVERY` quotes
while the feed is behind its schedule (or unpaced), and before every wait otherwise
(:meth:`_Sender.send`, :meth:`_Sender.serve`), so a failure is seen within that many quotes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from confluent_kafka import KafkaError

from pricing_ha.feed.sources import FeedSummary
from pricing_ha.kafka.headers import HeaderValue
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.publishing.quotes import Quote, encode_quote
from pricing_ha.telemetry.pricepath import TRACEPARENT, PricePath, end_on_delivery, traceparent_of

#: While the feed is behind its schedule, it serves delivery callbacks once per this many quotes
#: (each ``poll`` crosses into librdkafka; callbacks then come in batches).
POLL_EVERY = 16

_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
_DRAIN_ROUNDS = 3  # final flushes: the first, and up to two after replacing a wedged producer
Settings = dict[str, str | int | float | bool]

log = logging.getLogger("pricing_ha.feed")


class ProducerLike(Protocol):
    """The part of confluent-kafka's ``Producer`` the feed uses (a seam for unit tests)."""

    def produce(
        self,
        topic: str,
        *,
        value: bytes,
        key: str,
        on_delivery: Callable[[Any, Any], None],
        headers: list[tuple[str, HeaderValue]] | None = None,
    ) -> None:
        """Queues one message; raises ``BufferError`` when the local queue is full."""

    def poll(self, timeout: float) -> int:
        """Serves delivery callbacks."""

    def flush(self, timeout: float) -> int:
        """Waits for outstanding deliveries; returns how many are still queued."""

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fails every queued record (used when a wedged producer is replaced)."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Returns cluster metadata."""


@dataclass(slots=True)
class FeedRunSummary(FeedSummary):
    """A :class:`~pricing_ha.feed.sources.FeedSummary` that also counts producer replacements.

    Attributes:
        producer_replacements: how often a wedged producer was replaced (its unacknowledged
            quotes sent again).
    """

    producer_replacements: int = 0

    def to_json(self) -> bytes:
        """Serialises the summary (sorted keys) with ``producer_replacements``."""
        data = orjson.loads(FeedSummary.to_json(self))
        data["producer_replacements"] = self.producer_replacements
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)

    def render(self, max_instruments: int = 50) -> str:
        """The summary's text, with a line for producer replacements when there were any."""
        text = FeedSummary.render(self, max_instruments)
        if self.producer_replacements:
            text += f"\n  producer replaced {self.producer_replacements} times"
        return text


class _Pending:
    """A quote handed to the producer and not yet acknowledged; the callback of its first copy."""

    __slots__ = ("copy", "first_copy", "headers", "number", "quote", "sender", "value")

    def __init__(self, sender: _Sender, number: int, quote: Quote, copy: int) -> None:
        self.sender = sender
        self.number = number  # send order: the key of the sender's pending table
        self.quote = quote
        self.value = encode_quote(quote)
        self.headers: list[tuple[str, HeaderValue]] | None = None  # a traced quote's
        self.copy = copy  # the producer replacement count when the latest copy was sent
        self.first_copy = copy

    def __call__(self, err: KafkaError | None, _msg: Any) -> None:
        """The delivery report of the first copy."""
        self.sender.on_delivery(self.number, self.first_copy, err)


class _Copy:
    """The delivery callback of a quote sent again after a producer replacement."""

    __slots__ = ("copy", "number", "sender")

    def __init__(self, sender: _Sender, number: int, copy: int) -> None:
        self.sender, self.number, self.copy = sender, number, copy

    def __call__(self, err: KafkaError | None, _msg: Any) -> None:
        """The delivery report of this copy."""
        self.sender.on_delivery(self.number, self.copy, err)


class _Sender:
    """The feed's producer, and every quote it has not yet seen acknowledged."""

    def __init__(
        self,
        settings: Settings,
        factory: Callable[[Settings], ProducerLike],
        topic: str,
        summary: FeedRunSummary,
        price_path: PricePath | None,
    ) -> None:
        self._topic = topic
        self._summary = summary
        self._price_path = price_path
        self._pending: dict[int, _Pending] = {}  # by send number: insertion order is send order
        self._sent = 0
        self.out: ReplaceableProducer[ProducerLike] = ReplaceableProducer(
            settings,
            name=str(settings.get("client.id", "feed")),
            logger=log,
            factory=factory,
            on_replaced=self._resend,
        )

    def send(self, quote: Quote) -> None:
        """Produce one quote (a traced one gets a send span); every :data:`POLL_EVERY` quotes,
        serve callbacks."""
        number = self._sent
        self._sent += 1
        entry = _Pending(self, number, quote, self.out.replacements)
        callback: Callable[[Any, Any], None] = entry
        path = self._price_path
        if path is not None and path.sample_root():
            span = path.start_send(
                self._topic, None, key=quote.instrument, attributes={"pricing_ha.seq": quote.seq}
            )
            entry.headers = [(TRACEPARENT, traceparent_of(span))]
            callback = end_on_delivery(span, entry)
        self._pending[number] = entry
        self._produce(entry, callback)
        self._summary.on_produced(quote)
        if not self._sent % POLL_EVERY:
            self.serve()

    def serve(self) -> None:
        """Serve delivery callbacks; replace the producer if it is wedged (which re-sends what
        is pending)."""
        self.out.poll(0)
        self.recover()

    def recover(self) -> None:
        """Replace the producer if it is wedged (which re-sends what is pending)."""
        if self.out.replace_if_wedged() is not None:
            self._summary.producer_replacements = self.out.replacements

    def _produce(self, entry: _Pending, callback: Callable[[Any, Any], None]) -> None:
        while True:
            try:
                # No partition argument: the default partitioner must place the instrument.
                if entry.headers is None:
                    self.out.produce(
                        self._topic,
                        value=entry.value,
                        key=entry.quote.instrument,
                        on_delivery=callback,
                    )
                else:
                    self.out.produce(
                        self._topic,
                        value=entry.value,
                        key=entry.quote.instrument,
                        on_delivery=callback,
                        headers=entry.headers,
                    )
            except BufferError:
                self.out.poll(0.1)  # local queue full: let deliveries drain, then retry
            else:
                return

    def _resend(self, _reason: str) -> None:
        """The ``on_replaced`` hook: send every pending quote again, in the order first sent."""
        copy = self.out.replacements
        for number, entry in list(self._pending.items()):
            if self._pending.get(number) is not entry:
                continue  # acknowledged while an earlier quote waited for queue space
            entry.copy = copy
            self._produce(entry, _Copy(self, number, copy))

    def on_delivery(self, number: int, copy: int, err: KafkaError | None) -> None:
        """One delivery report: of quote ``number``'s copy ``copy``."""
        entry = self._pending.get(number)
        if entry is None:
            return  # another copy was acknowledged first, or the quote was given up
        quote = entry.quote
        if err is None:
            del self._pending[number]
            self._summary.on_delivered(quote.instrument, quote.seq)
            return
        if copy != entry.copy or err.code() in _PURGED or self.out.classify(err) is not None:
            return  # a newer copy is on its way, or one will be once the producer is replaced
        del self._pending[number]
        self._summary.on_failed(quote.instrument, quote.seq, err.str())

    def drain(self, timeout_s: float) -> None:
        """Flush; replace a wedged producer and flush again (bounded); give up on the rest."""
        for _ in range(_DRAIN_ROUNDS):
            self.out.flush(timeout_s)
            if not self._pending or self.out.wedged is None:
                break
            self.recover()
        for entry in self._pending.values():
            quote = entry.quote
            self._summary.on_failed(quote.instrument, quote.seq, "not acknowledged")
        self._pending.clear()
