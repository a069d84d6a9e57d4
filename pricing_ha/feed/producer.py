"""The producing loop of ``pricing-ha feed``: pacing, delivery tracking, final summary.

Quotes come from :mod:`.sources` (synthetic or CSV replay) and go to ``md.quotes`` keyed
by instrument. No partition is ever set explicitly: the client's partitioner places each quote,
configured as Kafka's default murmur2 (:mod:`~pricing_ha.kafka.partitioning`; librdkafka's default
hash differs), the function every other component relies on. With ``acks=all`` and an
idempotent producer, each instrument's quotes land on one partition in ``seq`` order with no
duplicates from producer retries.

Before producing, the feed checks that the broker answers (bounded by
``broker.connect_timeout_ms``) and that ``md.quotes`` has M partitions. It stops at the first
failed delivery (seen within :data:`~pricing_ha.feed._sender.POLL_EVERY` quotes: delivery
callbacks are served once per that many quotes while the feed is behind its schedule, and
before each wait when it is ahead): a synthetic quote lost in transit would be an unexplained
gap downstream.

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
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
from confluent_kafka import Producer

from pricing_ha.config import AppConfig
from pricing_ha.errors import ConfigError, TopicLayoutError
from pricing_ha.feed._sender import FeedRunSummary, ProducerLike, Settings, _Sender, log
from pricing_ha.feed.sources import FeedSummary, SyntheticMarket, feed_symbols, read_replay
from pricing_ha.kafka.partitioning import KEYED_PRODUCER_SETTINGS
from pricing_ha.kafka.topics import fetch_metadata, partition_counts
from pricing_ha.publishing.quotes import Quote
from pricing_ha.telemetry.pricepath import PricePath

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
#: A quote due within this is sent at once: a shorter sleep costs more CPU than it paces (the
#: kernel's timer slack alone is 50 µs), so above 5,000 quotes/s the feed sends small bursts
#: (about 10 quotes at 50,000/s), none of them more than this early.
_MIN_WAIT_S = 0.0002


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
    producer_factory: Callable[[Settings], ProducerLike] | None = None,
    price_path: PricePath | None = None,
) -> FeedRunSummary:
    """Produces quotes to ``topics.quotes`` until a limit, a stop request or a failure.

    Args:
        cfg: the configuration (broker, topic names, M).
        quotes: the quotes to send, in order.
        rate_hz: total quotes per second over all instruments; 0 sends as fast as possible.
            The schedule is absolute (quote i at start + i / rate), so pacing does not drift;
            a quote due within 0.2 ms is sent at once (see ``_MIN_WAIT_S``).
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
        if due - clock() > _MIN_WAIT_S:
            sender.serve()  # ahead of the schedule: callbacks now, while there is time
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
        quotes: Iterable[Quote] = (
            msgspec.structs.replace(q, epoch=epoch) for q in read_replay(replay)
        )
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
