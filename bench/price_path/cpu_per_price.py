"""CPU per price of the publisher's and the relay's per-record work, without a broker.

The price path's own code, driven in this process:

* **publisher**: a :class:`~pricing_ha.publishing.quote_worker.QuoteWorker` leading every
  partition, fed batches of 500 ``md.quotes`` records (decode, sequence check, pricing,
  encoding, headers, produce, delivery accounting, commits);
* **relay**: a :class:`~pricing_ha.dedupe.hot_path.HotPath` owning every partition, fed each
  price twice (the copies of P1 and P2, as ``prices.raw`` carries them): parse, arbitrate,
  emit the winner inside the partition's transaction, flush and commit per batch.

Input consumers are fakes that hand out pre-built records (a real consumer's fetch and its
``Message`` objects are not counted). Output goes through real ``confluent_kafka.Producer``
objects talking to librdkafka's in-process mock cluster (``test.mock.num.brokers``), so
produce calls, delivery reports and transactions are librdkafka's own; ``--producer fake``
replaces them with Python fakes that acknowledge every record at the next poll.

The reference, measured in the same run on the same batches and producers: a bare forwarder
of the same shape per role (``forward-publisher``: decode each quote's JSON, produce its bytes
with a delivery callback, flush per batch; ``forward-relay``: decode each copy's JSON, forward
P1's copies, flush per batch, no transaction), the per-record floor of Python plus
confluent-kafka that the product's work is compared with.

Reported per price, best of ``--runs``: the CPU time of the calling thread (the worker
thread's cost: ``time.thread_time``; the mock brokers' threads are not in it) and of the whole
process (``time.process_time``, which includes librdkafka's threads and the mock brokers).
CPU time is much less sensitive to other load on the machine than wall time, but not immune
(caches, frequency): say "under shared load" when the machine was not idle.

Run: ``.venv/bin/python -m bench.price_path.cpu_per_price [--role publisher|relay|both]``
(``--profile``: a cProfile of one run instead); writes bench/results/cpu_per_price.json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import pstats
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from bench.common.procstat import load
from bench.common.report import code_version, foreign_processes, write
from pricing_ha.config import AppConfig
from pricing_ha.dedupe.hot_path import HotPath
from pricing_ha.dedupe.output import RelayOutput
from pricing_ha.dedupe.output_producers import OutputProducers
from pricing_ha.dedupe.raw_input import RawInput
from pricing_ha.dedupe.read_ahead import ReadAhead
from pricing_ha.dedupe.stats import RelayStats
from pricing_ha.kafka.producers import ReplaceableProducer
from pricing_ha.publishing.pricing import ParamsBook, encode_price
from pricing_ha.publishing.quote_worker import PublisherStats, QuoteWorker
from pricing_ha.publishing.quotes import Quote, encode_quote
from pricing_ha.telemetry import Telemetry

BATCH = 500
EPOCH = 1_717_171_000_000
MOCK = {"test.mock.num.brokers": 1, "queue.buffering.max.messages": 2_000_000, "log_level": 3}


class _FakeConsumer:
    """Accepts assignments, commits and seeks; reads nothing (batches are handed in)."""

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        pass

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        pass

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        pass

    def seek(self, tp: TopicPartition) -> None:
        pass

    def close(self) -> None:
        pass


class _FakeProducer:
    """Acknowledges every record at the next poll or flush; transactions always succeed."""

    def __init__(self, _config: Any = None) -> None:
        self._pending: list[tuple[Callable[[KafkaError | None, Message], None], Message]] = []

    def produce(self, topic: str, **kwargs: Any) -> None:
        msg = Message(topic=topic, partition=kwargs.get("partition", 0), offset=0)
        self._pending.append((kwargs["on_delivery"], msg))

    def poll(self, _timeout: float = 0) -> int:
        pending, self._pending = self._pending, []
        for callback, msg in pending:
            callback(None, msg)
        return len(pending)

    def flush(self, timeout: float = 0) -> int:
        self.poll(timeout)
        return 0

    def purge(self, *_a: Any, **_k: Any) -> None:
        self._pending = []

    def init_transactions(self, _timeout: float = 0) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def commit_transaction(self, _timeout: float = 0) -> None:
        pass


def _mock_producer(config: dict[str, Any]) -> Producer:
    return Producer({**config, **MOCK})


def _instruments(n: int) -> list[str]:
    return [f"I{i:05d}" for i in range(n)]


def _quote_batches(n_batches: int, instruments: list[str], partitions: int) -> list[list[Message]]:
    """Quotes as ``md.quotes`` carries them: each instrument's seq up by one per quote."""
    seqs = dict.fromkeys(instruments, 0)
    offsets = [0] * partitions
    batches = []
    price = 1.08501
    for b in range(n_batches):
        batch = []
        for i in range(BATCH):
            name = instruments[(b * BATCH + i) % len(instruments)]
            seqs[name] += 1
            partition = hash(name) % partitions
            bid = round(price + (seqs[name] % 97) * 1e-5, 5)
            q = Quote(
                instrument=name,
                seq=seqs[name],
                bid=bid,
                ask=round(bid + 2e-5, 5),
                source_time_ns=time.time_ns(),
                epoch=EPOCH,
            )
            batch.append(
                Message(
                    topic="md.quotes",
                    partition=partition,
                    offset=offsets[partition],
                    key=name.encode(),
                    value=encode_quote(q),
                )
            )
            offsets[partition] += 1
        batches.append(batch)
    return batches


def _raw_batches(quote_batches: list[list[Message]], cfg: AppConfig) -> list[list[Message]]:
    """``prices.raw`` as two groups write it: each price twice, P1's copy then P2's."""
    book = ParamsBook.from_config(cfg.pricing)
    offsets: dict[int, int] = {}
    out: list[list[Message]] = []
    for batch in quote_batches:
        raw = []
        for msg in batch:
            value = msg.value()
            assert value is not None
            q = _decode_quote(value)
            price = encode_price(book.price(q))
            for group in ("p1", "p2"):
                partition = cast(int, msg.partition())
                offset = offsets.get(partition, 0)
                offsets[partition] = offset + 1
                raw.append(
                    Message(
                        topic="prices.raw",
                        partition=partition,
                        offset=offset,
                        key=msg.key(),
                        value=price,
                        headers=[
                            ("seq", str(q.seq).encode()),
                            ("group", group.encode()),
                            ("member", b"a"),
                            ("publish_ns", str(time.time_ns()).encode()),
                        ],
                    )
                )
        # A consumer's batch is at most BATCH records: split.
        out.extend(raw[i : i + BATCH] for i in range(0, len(raw), BATCH))
    return out


def _decode_quote(value: bytes) -> Quote:
    from pricing_ha.publishing.quotes import parse_quote

    return parse_quote(value, json.loads(value)["instrument"].encode())


def _publisher(cfg: AppConfig, mock: bool) -> QuoteWorker:
    worker = QuoteWorker(
        cfg, "p1", "a", lambda _p: True, PublisherStats(), telemetry=Telemetry.noop("bench")
    )
    worker.consumer.close()
    worker.consumer = cast(Any, _FakeConsumer())
    factory = _mock_producer if mock else _FakeProducer
    worker.producer = ReplaceableProducer(
        {**worker.producer._config},
        name="bench",
        logger=logging.getLogger("bench"),
        factory=factory,
    )
    for partition in range(cfg.topics.partitions):
        worker.assign(partition)
        worker.active.add(partition)
    worker.note_read(
        [Message(topic="md.quotes", partition=p, offset=0) for p in range(cfg.topics.partitions)]
    )
    return worker


def _relay(cfg: AppConfig, mock: bool) -> tuple[HotPath, OutputProducers]:
    stats = RelayStats()
    factory = cast(Callable[[dict[str, Any]], Producer], _mock_producer if mock else _FakeProducer)
    producers = OutputProducers(
        cfg, "r1", "pricing.relay.raw", stats=stats, producer_factory=factory
    )
    partitions = list(range(cfg.topics.partitions))
    producers.fences.fence(partitions, 10.0)
    out = RelayOutput(
        cfg,
        "r1",
        "pricing.relay.raw",
        producers,
        lambda _p: True,
        stats=stats,
        telemetry=Telemetry.noop("bench"),
    )
    raw = SimpleNamespace(commits=lambda *_a: [], rewind=lambda *_a: True)
    read_ahead = SimpleNamespace(reading=lambda: False, skipping=False, replaying=False)
    hot = HotPath(
        out,
        cast(RawInput, raw),
        cast(ReadAhead, read_ahead),
        window_s=0.5,
        may_emit=lambda _p: True,
        handing_over=lambda _p: False,
        asked=lambda _p: False,
        active=set(partitions),
        drop=lambda _p: None,
        commit=lambda _c: None,
        limits=cfg.limits,
    )
    for partition in partitions:
        hot.take_up(partition, {})
    return hot, producers


_Timing = tuple[float, float, int]  # thread CPU s, process CPU s, prices


def _timed(run: Callable[[], int]) -> _Timing:
    """(thread CPU s, process CPU s, prices) of one call."""
    t, p = time.thread_time(), time.process_time()
    n = run()
    return time.thread_time() - t, time.process_time() - p, n


def bench_publisher(
    cfg: AppConfig, batches: list[list[Message]], mock: bool
) -> tuple[float, float, int]:
    worker = _publisher(cfg, mock)

    def run() -> int:
        for batch in batches:
            worker.process(batch)
        worker.producer.flush(30)
        worker.idle()
        return len(batches) * BATCH

    result = _timed(run)
    assert worker.stats.priced == len(batches) * BATCH, worker.stats
    assert not worker._pending or all(not q for q in worker._pending.values())
    return result


def bench_relay(
    cfg: AppConfig, batches: list[list[Message]], mock: bool
) -> tuple[float, float, int]:
    hot, producers = _relay(cfg, mock)

    def run() -> int:
        for batch in batches:
            hot.process(batch)
        return sum(len(b) for b in batches) // 2

    result = _timed(run)
    assert producers._stats.relayed == result[2], producers._stats
    producers.fences.close()
    return result


def bench_forwarder(batches: list[list[Message]], mock: bool, *, keep: bytes | None) -> _Timing:
    """The reference: decode each record's JSON and produce its bytes (only copies whose
    ``group`` header is ``keep``, when given), a delivery callback each, a flush per batch."""
    producer: Any = _mock_producer({"linger.ms": 5}) if mock else _FakeProducer()
    delivered = [0]

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            delivered[0] += 1

    def run() -> int:
        n = 0
        for batch in batches:
            for msg in batch:
                value = msg.value()
                assert value is not None
                json.loads(value)
                if keep is not None and ("group", keep) not in (msg.headers() or []):
                    continue
                producer.produce("out", key=msg.key(), value=value, on_delivery=on_delivery)
                n += 1
            producer.poll(0)
            producer.flush(10)
        return n

    result = _timed(run)
    assert delivered[0] == result[2], (delivered, result)
    return result


def main() -> None:
    """Measure each role and its forwarding reference; write cpu_per_price.json."""
    parser = argparse.ArgumentParser(prog="python -m bench.price_path.cpu_per_price")
    parser.add_argument("--role", choices=["publisher", "relay", "both"], default="both")
    parser.add_argument("--producer", choices=["mock", "fake"], default="mock")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--instruments", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="cProfile one run instead")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    # The unused quote consumer's connection refusals (no broker here) are not news.
    logging.getLogger("pricing_ha.publisher").setLevel(logging.CRITICAL)
    cfg = AppConfig()
    mock = args.producer == "mock"
    quotes = _quote_batches(args.batches, _instruments(args.instruments), cfg.topics.partitions)
    roles: dict[str, Callable[[], _Timing]] = {}
    if args.role in ("publisher", "both"):
        roles["publisher"] = lambda: bench_publisher(cfg, quotes, mock)
        roles["forward-publisher"] = lambda: bench_forwarder(quotes, mock, keep=None)
    if args.role in ("relay", "both"):
        raw = _raw_batches(quotes, cfg)
        roles["relay"] = lambda: bench_relay(cfg, raw, mock)
        roles["forward-relay"] = lambda: bench_forwarder(raw, mock, keep=b"p1")
    figures: dict[str, Any] = {
        "code": code_version(),
        "load_average_1m_at_start": load(),
        "foreign_processes_at_start": foreign_processes(),
        "options": vars(args),
        "roles": {},
    }
    for role, bench in roles.items():
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(bench)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            continue
        bench()  # warm-up
        runs = [bench() for _ in range(args.runs)]
        thread_us = min(r[0] / r[2] for r in runs) * 1e6
        process_us = min(r[1] / r[2] for r in runs) * 1e6
        figures["roles"][role] = {
            "prices": runs[0][2],
            "thread_cpu_us_per_price": round(thread_us, 2),
            "process_cpu_us_per_price": round(process_us, 2),
            "load_average_1m_after": load(),
        }
        print(role, json.dumps(figures["roles"][role]), flush=True)
    if args.profile:
        return
    for role in ("publisher", "relay"):
        own, ref = figures["roles"].get(role), figures["roles"].get(f"forward-{role}")
        if own and ref:
            own["ratio_to_forwarder"] = round(
                own["thread_cpu_us_per_price"] / ref["thread_cpu_us_per_price"], 2
            )
    write("cpu_per_price", figures)


if __name__ == "__main__":
    main()
