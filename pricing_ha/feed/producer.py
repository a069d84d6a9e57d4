"""The producing loop of ``pricing-ha feed``: pacing, delivery tracking, final summary.

Quotes come from :mod:`.sources` (synthetic or CSV replay) and go to ``md.quotes`` keyed
by instrument. No partition is ever set explicitly: the client's partitioner places each quote,
configured as Kafka's default murmur2 (:mod:`~pricing_ha.kafka.partitioning`; librdkafka's default
hash differs), the function every other component relies on. With ``acks=all`` and an
idempotent producer, each instrument's quotes land on one partition in ``seq`` order with no
duplicates from producer retries.

Before producing, the feed checks that the broker answers (bounded by
``broker.connect_timeout_ms``) and that ``md.quotes`` has M partitions. It stops at the first
failed delivery: a synthetic quote lost in transit would be an unexplained gap downstream.

A failure that only means the producer is finished
(:func:`~pricing_ha.kafka.producers.producer_is_wedged`: e.g. a quote timed out while the broker
was paused, so its idempotent producer bumped its epoch) is not such a failure: the producer
is replaced (:class:`~pricing_ha.kafka.producers.ReplaceableProducer`) and every quote not yet
acknowledged is sent again, in the order first sent (so each instrument's in ``seq`` order),
before any new one. A quote may then reach ``md.quotes`` twice
(the first copy may have been written after all); none is lost. The summary counts the
replacements.

Price-path tracing starts here: with a :class:`~pricing_ha.telemetry.pricepath.PricePath`, each
quote is drawn for tracing at ``price_sample_ratio``; a drawn quote gets a ``send md.quotes``
span, ended when the broker acknowledges it, and carries its W3C ``traceparent`` header. The
other quotes are sent exactly as without tracing (no span, no header).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
from confluent_kafka import KafkaError, Message, Producer

from pricing_ha.config import AppConfig
from pricing_ha.errors import ConfigError, TopicLayoutError
from pricing_ha.feed.sources import FeedSummary, SyntheticMarket, feed_symbols, read_replay
from pricing_ha.kafka.headers import HeaderValue
from pricing_ha.kafka.partitioning import KEYED_PRODUCER_SETTINGS
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.kafka.topics import fetch_metadata, partition_counts
from pricing_ha.publishing.quotes import Quote, encode_quote
from pricing_ha.telemetry.pricepath import TRACEPARENT, PricePath, end_on_delivery, traceparent_of

__all__ = [
    "PRODUCER_DEFAULTS",
    "PRODUCER_REQUIRED",
    "FeedRunSummary",
    "run_configured_feed",
    "run_feed",
    "with_overrides",
]

PRODUCER_DEFAULTS: dict[str, str | int | float | bool] = {
    "client.id": "pricing-ha-feed",
    "linger.ms": 5,  # small: quotes are latency-sensitive, batches are a bonus
    "message.timeout.ms": 30_000,  # bounds how long a quote may wait for a dead broker
}
"""Producer settings that ``broker.librdkafka`` may override."""

PRODUCER_REQUIRED: dict[str, str | int | float | bool] = {
    **KEYED_PRODUCER_SETTINGS,
    "acks": "all",
    "enable.idempotence": True,
}
"""Producer settings the pipeline depends on; they win over ``broker.librdkafka``."""

_MAX_SLEEP_S = 0.05  # keeps the loop responsive to stop requests while pacing
_DRAIN_ROUNDS = 3  # final flushes: the first, and up to two after replacing a wedged producer
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
_Settings = dict[str, str | int | float | bool]

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


def with_overrides(
    cfg: AppConfig,
    *,
    instruments: int | None = None,
    rate_hz: float | None = None,
    seed: int | None = None,
) -> AppConfig:
    """Applies the feed command's ``--instruments``, ``--rate`` and ``--seed`` options.

    Raises:
        ConfigError: naming the option, if a value is out of range.
    """
    changes = {
        name: value
        for name, value in (
            ("instruments", instruments),
            ("rate_per_instrument_hz", rate_hz),
            ("seed", seed),
        )
        if value is not None
    }
    try:
        feed = dataclasses.replace(cfg.feed, **changes)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError("command line", f"feed.{exc.key}", exc.problem) from exc
    return dataclasses.replace(cfg, feed=feed)


def _check_quotes_topic(producer: ProducerLike, cfg: AppConfig) -> None:
    metadata = fetch_metadata(
        producer, cfg.broker.bootstrap_servers, cfg.broker.connect_timeout_ms / 1000
    )
    topic, expected = cfg.topics.quotes, cfg.topics.partitions
    count = partition_counts(metadata, [topic])[topic]
    if count is None:
        raise TopicLayoutError(f"topic {topic} does not exist; run `pricing-ha topics create`")
    if count != expected:
        raise TopicLayoutError(
            f"topic {topic} has {count} partitions, but topics.partitions is {expected}"
        )


@dataclass(slots=True)
class _Pending:
    """A quote handed to the producer and not yet acknowledged."""

    quote: Quote
    value: bytes
    headers: list[tuple[str, HeaderValue]] | None
    copy: int  # the producer replacement count when this copy was sent


class _Sender:
    """The feed's producer, and every quote it has not yet seen acknowledged."""

    def __init__(
        self,
        settings: _Settings,
        factory: Callable[[_Settings], ProducerLike],
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
        """Produce one quote (a traced one gets a send span), then serve callbacks."""
        number = self._sent
        self._sent += 1
        copy = self.out.replacements
        callback = self._callback(number, copy)
        headers: list[tuple[str, HeaderValue]] | None = None
        if self._price_path is not None and self._price_path.sample_root():
            span = self._price_path.start_send(
                self._topic, None, key=quote.instrument, attributes={"pricing_ha.seq": quote.seq}
            )
            headers = [(TRACEPARENT, traceparent_of(span))]
            callback = end_on_delivery(span, callback)
        entry = _Pending(quote, encode_quote(quote), headers, copy)
        self._pending[number] = entry
        self._produce(entry, callback)
        self._summary.on_produced(quote)
        self.out.poll(0)
        self.recover()

    def recover(self) -> None:
        """Replace the producer if it is wedged (which re-sends what is pending)."""
        if self.out.replace_if_wedged() is not None:
            self._summary.producer_replacements = self.out.replacements

    def _produce(self, entry: _Pending, callback: Callable[[Any, Any], None]) -> None:
        extra: dict[str, Any] = {} if entry.headers is None else {"headers": entry.headers}
        while True:
            try:
                # No partition argument: the default partitioner must place the instrument.
                self.out.produce(
                    self._topic,
                    value=entry.value,
                    key=entry.quote.instrument,
                    on_delivery=callback,
                    **extra,
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
            self._produce(entry, self._callback(number, copy))

    def _callback(self, number: int, copy: int) -> Callable[[Any, Any], None]:
        def delivered(err: KafkaError | None, _msg: Message) -> None:
            self._on_delivery(number, copy, err)

        return delivered

    def _on_delivery(self, number: int, copy: int, err: KafkaError | None) -> None:
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


def run_feed(
    cfg: AppConfig,
    quotes: Iterable[Quote],
    *,
    rate_hz: float,
    count: int | None = None,
    duration_s: float | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    producer_factory: Callable[[_Settings], ProducerLike] | None = None,
    price_path: PricePath | None = None,
) -> FeedRunSummary:
    """Produces quotes to ``topics.quotes`` until a limit, a stop request or a failure.

    Args:
        cfg: the configuration (broker, topic names, M).
        quotes: the quotes to send, in order.
        rate_hz: total quotes per second over all instruments; 0 sends as fast as possible.
            The schedule is absolute (quote i at start + i / rate), so pacing does not drift.
        count: stop after this many quotes.
        duration_s: stop after this many seconds.
        should_stop: polled between quotes; True ends the run gracefully (e.g. on SIGTERM).
        clock: monotonic clock, injectable for tests.
        sleep: sleep function, injectable for tests.
        producer_factory: builds the producer from its settings, injectable for tests.
        price_path: traces a sample of the quotes (see the module docstring); ``None``: none.

    Returns:
        The summary (a :class:`FeedRunSummary`), after a flush bounded by
        ``message.timeout.ms`` (repeated, at most twice, after replacing a wedged producer).
        Quotes still unacknowledged then count as failed.

    Raises:
        BrokerUnavailableError: if the broker does not answer at startup.
        TopicLayoutError: if ``md.quotes`` is missing or has the wrong partition count.
    """
    settings = cfg.broker.client_config(defaults=PRODUCER_DEFAULTS, required=PRODUCER_REQUIRED)
    summary = FeedRunSummary(topic=cfg.topics.quotes)
    # The producer logs through Python logging (as every client does), so the command's
    # connection-log filter applies to it (pricing_ha.kafka.client_log).
    factory = producer_factory or (lambda s: Producer(s, logger=log))
    sender = _Sender(settings, factory, cfg.topics.quotes, summary, price_path)
    _check_quotes_topic(sender.out.producer, cfg)
    start = clock()
    for sent, quote in enumerate(itertools.islice(quotes, count)):
        # Unpaced, every quote is due now, so --duration measures elapsed time.
        due = start + sent / rate_hz if rate_hz > 0 else clock()
        if duration_s is not None and due - start >= duration_s:
            break
        while (wait := due - clock()) > 0 and not should_stop():
            sleep(min(wait, _MAX_SLEEP_S))
        if should_stop() or summary.failed:
            break
        sender.send(quote)
    # Wait out the last deliveries; message.timeout.ms guarantees each one resolves by then.
    sender.drain(float(settings["message.timeout.ms"]) / 1000 + 5)
    return summary


def feed_epoch(cfg: AppConfig, clock_ns: Callable[[], int] = time.time_ns) -> int:
    """The epoch of a feed starting now: ``[feed] epoch_ms`` if set, else the time in Unix ms.

    A restarted feed numbers every instrument from seq 1 again in a new, larger epoch, so
    nothing downstream takes its quotes for old ones (docs/architecture.md, "Sequence epochs").
    """
    if cfg.feed.epoch_ms is not None:
        return cfg.feed.epoch_ms
    return clock_ns() // 1_000_000


def run_configured_feed(
    cfg: AppConfig,
    *,
    replay: Path | None = None,
    count: int | None = None,
    duration_s: float | None = None,
    summary_out: Path | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    echo: Callable[[str], None] = print,
    price_path: PricePath | None = None,
) -> FeedSummary:
    """Runs the feed as the ``pricing-ha feed`` command does.

    A replay file is validated completely before the first quote is sent, so a bad row never
    leaves a half-sent file behind. Replay paces at ``rate_per_instrument_hz`` times the number
    of distinct instruments in the file.

    Raises:
        ReplayError: for a bad replay file (file and line named).
        BrokerUnavailableError: if the broker does not answer.
        TopicLayoutError: if ``md.quotes`` is missing or has the wrong partition count.
    """
    rate = cfg.feed.rate_per_instrument_hz
    epoch = feed_epoch(cfg)
    if replay is not None:
        per_instrument = Counter(q.instrument for q in read_replay(replay))
        echo(
            f"replaying {sum(per_instrument.values())} quotes of {len(per_instrument)} "
            f"instruments from {replay}"
        )
        quotes: Iterable[Quote] = (dataclasses.replace(q, epoch=epoch) for q in read_replay(replay))
        total_rate = rate * len(per_instrument)
    else:
        symbols = feed_symbols(cfg.feed)
        quotes = SyntheticMarket(symbols, cfg.feed.seed, epoch).quotes()
        total_rate = rate * len(symbols)
        echo(
            f"feeding {len(symbols)} instruments at {rate:g} Hz each "
            f"(seed {cfg.feed.seed}, epoch {epoch})"
        )
    summary = run_feed(
        cfg,
        quotes,
        rate_hz=total_rate,
        count=count,
        duration_s=duration_s,
        should_stop=should_stop,
        price_path=price_path,
    )
    echo(summary.render())
    if summary_out is not None:
        summary_out.parent.mkdir(parents=True, exist_ok=True)
        summary_out.write_bytes(summary.to_json())
    return summary
