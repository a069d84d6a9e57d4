"""Judging a hostile-mix run from outside: topics read back raw, verdicts per hostile class.

The reader keeps headers as bytes (hostile headers need not be UTF-8, and a relay that copies
them must not crash the judge). :class:`Verdicts` collects one list of failures per class, so
that a failing run names every class that failed, not just the first.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from pricing_ha.kafka.headers import header_list
from tests.integration.hostile.hostile import FATES, FORGED_HEADERS, MAX_SEQ, Fate

MAX_REASON_BYTES = 256
CONTROL_HEADER = "pricing-ha-control"


@dataclass(frozen=True, slots=True)
class Rec:
    """One record read back, headers as bytes."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, or ``None``."""
        found = None
        for k, v in self.headers:
            if k == name:
                found = v
        return found


def read_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> list[Rec]:
    """Every committed record of ``topic``: up to the end offsets seen at the start.

    Stops once every partition is read to its end offset, or after 1.5 s with nothing new
    (a transactional topic ends in a commit marker, which is never handed out), or at
    ``timeout_s``.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"judge-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
            "log.connection.close": False,
        }
    )
    out: list[Rec] = []
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            marks = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if marks is not None and marks[1] > marks[0]:
                ends[p] = marks[1]
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while ends and time.monotonic() < deadline and time.monotonic() - last_new < 1.5:
            batch = consumer.consume(5000, 0.2)
            for msg in batch:
                part, o = msg.partition(), msg.offset()
                if msg.error() is not None or part is None or o is None:
                    continue
                if o + 1 >= ends.get(part, 0):
                    ends.pop(part, None)
                key, value = msg.key(), msg.value()
                out.append(
                    Rec(
                        part,
                        o,
                        key.encode() if isinstance(key, str) else key,
                        value.encode() if isinstance(value, str) else value,
                        tuple(
                            (k, v.encode() if isinstance(v, str) else (v or b""))
                            for k, v in header_list(msg.headers())
                        ),
                        msg.timestamp()[1],
                    )
                )
            if batch:
                last_new = time.monotonic()
    except KafkaException as exc:
        raise AssertionError(f"could not read {topic}: {exc}") from exc
    finally:
        consumer.close()
    return out


def order_key(value: bytes | None) -> tuple[str, tuple[int, int]] | None:
    """Instrument and (epoch, seq) of a quote or price value; ``None`` if it is not one."""
    try:
        obj = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    instrument, seq, epoch = obj.get("instrument"), obj.get("seq"), obj.get("epoch", 0)
    if not isinstance(instrument, str) or not isinstance(seq, int) or not isinstance(epoch, int):
        return None
    return instrument, (epoch, seq)


@dataclass(frozen=True, slots=True)
class Sent:
    """A hostile record as the broker acknowledged it."""

    kind: str
    role: str
    partition: int
    offset: int
    instrument: str | None  # the name it carries, for classes with a valid value


@dataclass
class Verdicts:
    """Failures per class (an empty list: the class passed), and what became of its records."""

    failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    fates: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def fail(self, kind: str, what: str) -> None:
        """Record one failure of ``kind``."""
        self.failures[kind].append(what)

    def report(self, classes: Iterable[str]) -> str:
        """One line per class: ok, or its first failures."""
        lines = []
        for kind in classes:
            got = self.failures.get(kind, [])
            fate = FATES[kind].value if kind in FATES else ""
            seen = ", ".join(f"{n} {fate}" for fate, n in sorted(self.fates[kind].items()))
            verdict = (
                ("ok" + (f" ({seen})" if seen else ""))
                if not got
                else f"FAIL ({len(got)}): " + "; ".join(got[:3])
            )
            lines.append(f"  {kind:<30} {verdict}" + (f"   [{fate}]" if got and fate else ""))
        return "\n".join(lines)

    @property
    def failed(self) -> list[str]:
        """The classes with at least one failure."""
        return sorted(k for k, v in self.failures.items() if v)


def by_source(dlq: list[Rec]) -> dict[tuple[int, int], list[Rec]]:
    """Dead letters by the (partition, offset) of the record they stand for."""
    out: dict[tuple[int, int], list[Rec]] = defaultdict(list)
    for r in dlq:
        p, o = r.header("source.partition"), r.header("source.offset")
        if p is not None and o is not None and p.isdigit() and o.isdigit():
            out[int(p), int(o)].append(r)
    return out


def bad_reason(r: Rec) -> str | None:
    """Why a dead letter's reason header is not acceptable, or ``None``."""
    reason = r.header("reason")
    if not reason:
        return "no reason header"
    if len(reason) > MAX_REASON_BYTES:
        return f"reason of {len(reason)} bytes"
    return None


def unclean_headers(r: Rec) -> str | None:
    """Why a price on ``prices`` carries headers the relay did not write, or ``None``."""
    names = {k for k, _ in r.headers}
    forged = names & set(FORGED_HEADERS)
    if forged:
        return f"forged headers {sorted(forged)}"
    for k, v in r.headers:
        try:
            v.decode()
        except UnicodeDecodeError:
            return f"header {k!r} is not UTF-8"
    seq, got = r.header("seq"), order_key(r.value)
    if seq is not None and (got is None or seq != str(got[1][1]).encode()):
        return f"seq header {seq[:24]!r} differs from the value's seq"
    publish_ns = r.header("publish_ns")
    if publish_ns is not None and not (publish_ns.isascii() and publish_ns.isdigit()):
        return f"publish_ns header {publish_ns!r}"
    return None


def exactly_once(
    real: dict[str, list[tuple[int, int]]], prices: dict[str, list[tuple[int, int]]]
) -> dict[str, str]:
    """Per real instrument whose prices are not its quotes exactly once in order: why."""
    out = {}
    for instrument, want in real.items():
        got = prices.get(instrument, [])
        if got == want:
            continue
        have = set(got)
        lost = [s for s in want if s not in have]
        dups = len(got) - len(have)
        unordered = sum(1 for a, b in itertools.pairwise(got) if b <= a)
        extra = len(have - set(want))
        first = f", first lost {lost[0]}" if lost else ""
        out[instrument] = (
            f"{instrument}: {len(lost)} of {len(want)} lost{first}, {dups} duplicated, "
            f"{unordered} out of order, {extra} not from the feed"
        )
    return out


def longest_silences(
    prices: list[Rec], real: Iterable[str], start_ms: int, end_ms: int
) -> dict[str, float]:
    """Per real instrument, the longest time (s) between prices within [start_ms, end_ms]."""
    times: dict[str, list[int]] = defaultdict(list)
    wanted = set(real)
    for r in prices:
        name = r.key.decode(errors="replace") if r.key else ""
        if name in wanted and start_ms <= r.timestamp_ms <= end_ms:
            times[name].append(r.timestamp_ms)
    out = {}
    for name in wanted:
        ts = [start_ms, *sorted(times.get(name, [])), end_ms]
        out[name] = max(b - a for a, b in itertools.pairwise(ts)) / 1000
    return out


def seq_max_on(prices: list[Rec]) -> set[str]:
    """The instruments that have a price with seq 2^63-1 on ``prices``."""
    out = set()
    for r in prices:
        got = order_key(r.value)
        if got is not None and got[1][1] == MAX_SEQ:
            out.add(got[0])
    return out


def genuine_leaders(neli: list[Rec], groups: dict[str, str], since_ms: int) -> dict[str, set[int]]:
    """Per group label, the partitions its genuine members say they lead (heartbeats' ``l``).

    Only heartbeats written at or after ``since_ms`` count, and none of a ``forged-`` member.
    Decoded here, defensively, not with the code under test.
    """
    labels = {gid: label for label, gid in groups.items()}
    out: dict[str, set[int]] = {label: set() for label in groups}
    for r in neli:
        if r.timestamp_ms < since_ms:
            continue
        try:
            hb = orjson.loads(r.value or b"")
        except orjson.JSONDecodeError:
            continue
        if not isinstance(hb, dict):
            continue
        group, member, led = hb.get("g"), hb.get("m"), hb.get("l")
        if group not in labels or not isinstance(member, str) or member.startswith("forged-"):
            continue
        if isinstance(led, list):
            out[labels[group]].update(p for p in led if isinstance(p, int))
    return out


@dataclass(frozen=True)
class Run:
    """What a run left behind, read back from outside.

    Attributes:
        sent: every hostile record the broker acknowledged.
        real: per real instrument, the (epoch, seq) of each quote the feed wrote, in order.
        prices: ``prices``; dlq: ``md.quotes.dlq``; raw_dlq: ``prices.raw.dlq``.
        groups: the publishing groups' names, as their dead letters' ``group`` header says.
        exits: process name -> how it exited, or which of its workers failed (with
            ``causes k1,k2`` naming classes).
        led: why the groups do not all lead every partition afterwards, or ``None``.
    """

    sent: list[Sent]
    real: dict[str, list[tuple[int, int]]]
    prices: list[Rec]
    dlq: list[Rec]
    raw_dlq: list[Rec]
    groups: frozenset[str]
    exits: dict[str, str]
    led: str | None


def judge(run: Run) -> Verdicts:
    """The verdicts of a run, per class (see the test module's docstring)."""
    v = Verdicts()
    kinds = {s.kind for s in run.sent}
    _judge_liveness(run, kinds, v)
    per = _judge_prices(run, v)
    _judge_real(run, per, v)
    _judge_fates(run, per, v)
    return v


def _judge_liveness(run: Run, kinds: set[str], v: Verdicts) -> None:
    for name, why in run.exits.items():
        v.fail(
            "process.exits" if why.startswith("exited") else "process.worker_failures",
            f"{name} {why}",
        )
        for kind in why.rpartition("causes ")[2].split(","):
            if kind in kinds:
                v.fail(kind, f"made {name} fail")
    if run.led is not None:
        for kind in sorted(kinds):
            if FATES[kind] is Fate.REJECTED:
                v.fail(kind, run.led)


def _judge_prices(run: Run, v: Verdicts) -> dict[str, list[tuple[int, int]]]:
    """Per instrument, the (epoch, seq) of its prices in order; checks values and headers."""
    names = {
        s.instrument: s.kind for s in run.sent if s.instrument and s.instrument.startswith("HX.")
    }
    per: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in sorted(run.prices, key=lambda r: (r.partition, r.offset)):
        if r.key is None and r.header(CONTROL_HEADER) is not None:
            continue  # a relay's own control record
        got = order_key(r.value)
        if got is None:
            v.fail("prices.values", f"not a price at {r.partition}:{r.offset}: {r.value!r:.60}")
            continue
        instrument = got[0]
        per[instrument].append(got[1])
        if (why := unclean_headers(r)) is not None:
            v.fail(names.get(instrument, "prices.headers"), f"{instrument} on prices with {why}")
        if (
            instrument not in run.real
            and instrument not in names
            and not instrument.startswith("FLOOD.")
        ):
            v.fail("prices.values", f"unknown instrument {instrument!r} on prices")
    return per


def _judge_real(run: Run, per: dict[str, list[tuple[int, int]]], v: Verdicts) -> None:
    targets: dict[str, set[str]] = defaultdict(set)
    for s in run.sent:
        if s.kind.endswith("seq_max") and s.instrument:
            targets[s.instrument].add(s.kind)
    for instrument, why in exactly_once(run.real, per).items():
        v.fail("real.exactly_once", why)
        for kind in targets.get(instrument, ()):
            v.fail(kind, why)
    for instrument in seq_max_on(run.prices):
        for kind in targets.get(instrument, {"real.exactly_once"}):
            v.fail(kind, f"a price of {instrument} with seq 2^63-1 on prices")


def _outcome(dead_lettered: bool, on_prices: int, relay_dead_lettered: bool) -> str:
    if dead_lettered:
        return "dead-lettered"
    if on_prices:
        return "on prices"
    return "dead-lettered by the relay" if relay_dead_lettered else "missing"


def _judge_fates(run: Run, per: dict[str, list[tuple[int, int]]], v: Verdicts) -> None:
    dlqs = {"quotes": by_source(run.dlq), "raw": by_source(run.raw_dlq)}
    # A quote's price may be dead-lettered downstream, by the relay (an instrument limit, a seq
    # jump): found there by the instrument and seq in its value, not by a source offset.
    relay_dead = {k for r in run.raw_dlq if (k := order_key(r.value)) is not None}
    held_max = {name for name, (_, seq) in relay_dead if seq == MAX_SEQ}
    relay_dead_names = {name for name, _ in relay_dead}
    for s in run.sent:
        fate = FATES[s.kind]
        if fate is Fate.REJECTED:
            continue
        where = f"{s.role} {s.partition}:{s.offset}"
        letters = dlqs[s.role].get((s.partition, s.offset), [])
        may_price = fate is not Fate.DEAD_LETTER
        on = len(per.get(s.instrument or "", [])) if may_price else 0
        downstream = held_max if s.kind.endswith("seq_max") else relay_dead_names
        relayed_dead = (may_price or s.kind.endswith("seq_max")) and s.instrument in downstream
        v.fates[s.kind][_outcome(bool(letters), on, relayed_dead)] += 1
        for letter in letters:
            if (why := bad_reason(letter)) is not None:
                v.fail(s.kind, f"dead letter of {where}: {why}")
        if fate is Fate.DEAD_LETTER:
            if s.kind.endswith("seq_max"):
                if not letters and s.instrument not in held_max:
                    v.fail(s.kind, f"{s.instrument} seq 2^63-1 in no dead-letter topic")
            elif s.role == "quotes":  # each publishing group consumes it, so each dead-letters it
                by = {(r.header("group") or b"").decode(errors="replace") for r in letters}
                for group in sorted(run.groups - by):
                    v.fail(s.kind, f"{where} not dead-lettered by {group}")
            elif not letters:
                v.fail(s.kind, f"{where} not dead-lettered by a relay")
            continue
        if on > 1:
            v.fail(s.kind, f"{s.instrument} on prices {on} times")
        elif on == 0 and not letters and s.instrument not in relay_dead_names:
            v.fail(s.kind, f"{where} neither on prices nor dead-lettered")
