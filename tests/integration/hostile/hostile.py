"""Hostile records for the mixed-traffic test: every class of issue 45, about 1,000 a second.

A :class:`HostileMix` makes, second by second, the records an attacker or a buggy upstream
with write access could put on ``md.quotes``, ``prices.raw`` and the NELI topic. Each record
names its *class* (``quote.invalid_json``, ``raw.forged_headers``, ``neli.huge_numbers``...),
the judge asserts per class, and :data:`FATES` says what the judge accepts for each:

* ``DEAD_LETTER``: every role that consumes it dead-letters it (``md.quotes.dlq`` from each
  publishing group, ``prices.raw.dlq`` from a relay) with a reason of at most 256 bytes, and it
  never reaches ``prices``.
* ``DEAD_LETTER_OR_SANITISED``: a raw price whose *value* is a valid price of an instrument only
  this class uses, with hostile headers. Without authentication nothing tells it from a real
  price (stopping unknown writers is the ACLs' job), so it may reach ``prices``, but only once
  and only as the relay writes prices: no control header, no unknown header, a ``seq`` header (if
  any) equal to the value's, text headers. Or it is dead-lettered.
* ``DEAD_LETTER_OR_ONCE``: a valid quote or price of a new instrument (the name flood): on
  ``prices`` at most once, or dead-lettered (when the bounded state turns it away).
* ``REJECTED``: a record on the NELI topic. The topic has no dead-letter topic (heartbeats are
  the library's, and a member cannot write to another group's topic); the fate is "rejected and
  counted", judged by its effect: no process exits, every group keeps leading every partition,
  and prices keep flowing.

Records of real instruments (oversized, seq 2^63-1, and the malformed quotes keyed by real
symbols so that they land on the partitions real prices use) must also cost no real price.
With ``epoch`` set, quotes and prices carry it (the seq-epoch format); ``None`` leaves it out.
"""

from __future__ import annotations

import enum
import functools
import itertools
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import orjson

from neli.partitioner import role_partition
from tests.integration.hostile.hostile_neli import neli_value, nested

MAX_SEQ = 2**63 - 1
OVERSIZED_BYTES = 600 * 1024
FLOOD_NAME_LEN = 60  # long names: the standby's checkpoint grows fastest per instrument


class Fate(enum.Enum):
    """What the judge accepts for a class (see the module docstring)."""

    DEAD_LETTER = "dead-lettered"
    DEAD_LETTER_OR_SANITISED = "dead-lettered, or on prices once with only the relay's headers"
    DEAD_LETTER_OR_ONCE = "dead-lettered, or on prices at most once"
    REJECTED = "rejected (no dead-letter topic): no exit, leadership and prices unaffected"


#: class -> (topic role, records per second in the steady mix). Sums to 1,000.
RATES: dict[str, tuple[str, int]] = {
    "quote.invalid_json": ("quotes", 60),
    "quote.wrong_types": ("quotes", 60),
    "quote.huge_numbers": ("quotes", 50),
    "quote.deep_nesting": ("quotes", 30),
    "quote.flood": ("quotes", 250),
    "raw.non_utf8_header": ("raw", 40),
    "raw.publish_ns_superscript": ("raw", 40),
    "raw.invalid_json": ("raw", 30),
    "raw.wrong_types": ("raw", 30),
    "raw.huge_numbers": ("raw", 30),
    "raw.deep_nesting": ("raw", 20),
    "raw.forged_headers": ("raw", 40),
    "raw.forged_control": ("raw", 20),
    "raw.flood": ("raw", 200),
    "neli.invalid_json": ("neli", 15),
    "neli.huge_numbers": ("neli", 20),
    "neli.deep_nesting": ("neli", 15),
    "neli.future_timestamps": ("neli", 20),
    "neli.forged_relay_heartbeat": ("neli", 30),
}
#: Classes sent a few times, on a schedule (see :meth:`HostileMix.second`), not in the steady mix.
SCHEDULED = {"quote.oversized": "quotes", "quote.seq_max": "quotes", "raw.seq_max": "raw"}
#: class -> the role of the topic its records go to.
ROLES = {**{k: role for k, (role, _) in RATES.items()}, **SCHEDULED}

FATES: dict[str, Fate] = {
    **{k: Fate.DEAD_LETTER for k, (role, _) in RATES.items() if role != "neli"},
    **{k: Fate.REJECTED for k, (role, _) in RATES.items() if role == "neli"},
    "quote.flood": Fate.DEAD_LETTER_OR_ONCE,
    "raw.flood": Fate.DEAD_LETTER_OR_ONCE,
    "raw.non_utf8_header": Fate.DEAD_LETTER_OR_SANITISED,
    "raw.publish_ns_superscript": Fate.DEAD_LETTER_OR_SANITISED,
    "raw.forged_headers": Fate.DEAD_LETTER_OR_SANITISED,
    "quote.oversized": Fate.DEAD_LETTER,
    "quote.seq_max": Fate.DEAD_LETTER,
    "raw.seq_max": Fate.DEAD_LETTER,
}

#: Header names only a forger writes; none may reach ``prices``.
FORGED_HEADERS = ("x-forged", "x-unknown-0", "pricing-ha-control")


@dataclass(frozen=True, slots=True)
class HostileRecord:
    """One record to produce, and the class it belongs to."""

    kind: str
    role: str  # "quotes", "raw" or "neli"
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def _json(obj: object) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


@dataclass
class HostileMix:
    """Makes the hostile records of each second of a run.

    Attributes:
        partitions: M, the partition count of every topic.
        real: the genuine feed's instruments (malformed quotes are keyed by them).
        groups: NELI group ids, ``{"p1": ..., "p2": ..., "relay": ...}``.
        epoch: the feed's epoch when quotes and prices carry one, else ``None``.
        flood_partition: the partition every flooded name hashes to (one partition's state
            and checkpoint take the whole flood, as an attacker would arrange).
        only: the classes to send (``None``: all), for diagnosing one class on its own.
    """

    partitions: int
    real: Sequence[str]
    groups: dict[str, str]
    epoch: int | None = None
    flood_partition: int = 0
    only: frozenset[str] | None = None
    _serial: Iterator[int] = field(default_factory=itertools.count)
    _tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6].upper())  # noqa: PLW0108

    def wanted(self, kind: str) -> bool:
        """Whether this mix sends class ``kind``."""
        return self.only is None or kind in self.only

    # -- shared shapes -----------------------------------------------------------------------

    def _n(self) -> int:
        return next(self._serial)

    def _keyed(
        self,
        kind: str,
        role: str,
        key: str,
        value: bytes | None,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> HostileRecord:
        k = key.encode()
        return HostileRecord(kind, role, role_partition(k, self.partitions), k, value, headers)

    def _quote(self, instrument: str, seq: object, /, **over: object) -> dict[str, object]:
        q: dict[str, object] = {
            "instrument": instrument,
            "seq": seq,
            "bid": 100.0,
            "ask": 100.5,
            "source_time_ns": time.time_ns(),
        }
        if self.epoch is not None:
            q["epoch"] = self.epoch
        q.update(over)
        return q

    def _price(self, instrument: str, seq: int) -> bytes:
        p: dict[str, object] = {
            "instrument": instrument,
            "seq": seq,
            "bid": 100.0,
            "ask": 100.5,
            "mid": 100.25,
            "source_time_ns": time.time_ns(),
        }
        if self.epoch is not None:
            p["epoch"] = self.epoch
        return _json(p)

    def _real(self, n: int) -> str:
        return self.real[n % len(self.real)]

    def hostile_name(self, kind: str, n: int) -> str:
        """An instrument name that only class ``kind`` uses (never a real symbol)."""
        return f"HX.{self._tag}.{kind}.{n}"

    def flood_name(self, n: int) -> str:
        """The ``n``-th flooded name that hashes to :attr:`flood_partition` (searched for)."""
        while True:
            stem = f"FLOOD.{self._tag}.{n}."
            name = stem + "X" * (FLOOD_NAME_LEN - len(stem))
            if role_partition(name.encode(), self.partitions) == self.flood_partition:
                return name
            n = self._n()

    # -- one record of each class --------------------------------------------------------------

    def make(self, kind: str) -> HostileRecord:
        """One record of class ``kind``."""
        n = self._n()
        role = ROLES[kind]
        maker = getattr(self, "_" + kind.replace(".", "_"))
        record: HostileRecord = maker(n)
        assert record.kind == kind, record
        assert record.role == role, record
        return record

    def _quote_invalid_json(self, n: int) -> HostileRecord:
        bad = [b"{not json", b"\xff\xfe garbage", b"", b'{"instrument": "', b"null", b"[]"]
        return self._keyed("quote.invalid_json", "quotes", self._real(n), bad[n % len(bad)])

    def _quote_wrong_types(self, n: int) -> HostileRecord:
        sym = self._real(n)
        variants: list[dict[str, object]] = [
            self._quote(sym, "7"),
            self._quote(sym, True),
            self._quote(sym, 1, bid=None),
            self._quote(sym, 1, bid="1.0"),
            self._quote(sym, 1, instrument=5),
            self._quote(sym, 1, source_time_ns=[1]),
            self._quote(sym, 1, epoch="e") if self.epoch is not None else self._quote(sym, 1.5),
        ]
        return self._keyed("quote.wrong_types", "quotes", sym, _json(variants[n % len(variants)]))

    def _quote_huge_numbers(self, n: int) -> HostileRecord:
        sym = self._real(n)
        base = f'"instrument":"{sym}","source_time_ns":1'.encode()
        variants = [
            b'{%s,"seq":1e400,"bid":1,"ask":2}' % base,
            b'{%s,"seq":1,"bid":1e400,"ask":1e400}' % base,
            b'{%s,"seq":%d,"bid":1,"ask":2}' % (base, 10**400),
            b'{%s,"seq":%d,"bid":1,"ask":2}' % (base, 2**64),
            b'{%s,"seq":1,"bid":1e-400,"ask":2}' % base,
        ]
        return self._keyed("quote.huge_numbers", "quotes", sym, variants[n % len(variants)])

    def _quote_deep_nesting(self, n: int) -> HostileRecord:
        sym = self._real(n)
        value = b'{"instrument":"%s","seq":%s,"bid":1,"ask":2,"source_time_ns":1}' % (
            sym.encode(),
            nested(),
        )
        return self._keyed("quote.deep_nesting", "quotes", sym, value)

    def _quote_flood(self, n: int) -> HostileRecord:
        name = self.flood_name(n)
        return self._keyed("quote.flood", "quotes", name, _json(self._quote(name, 1)))

    def _quote_oversized(self, n: int) -> HostileRecord:
        sym = self._real(n)
        value = _json(self._quote(sym, 1, bid="A" * OVERSIZED_BYTES))
        return self._keyed("quote.oversized", "quotes", sym, value)

    def _quote_seq_max(self, n: int) -> HostileRecord:
        sym = self._real(n)
        return self._keyed("quote.seq_max", "quotes", sym, _json(self._quote(sym, MAX_SEQ)))

    def _raw_headers(self, seq: int = 1) -> tuple[tuple[str, bytes], ...]:
        """The headers a publisher writes (``seq`` as in the value)."""
        return (
            ("seq", str(seq).encode()),
            ("group", b"forger"),
            ("member", b"m"),
            ("publish_ns", str(time.time_ns()).encode()),
        )

    def _raw_non_utf8_header(self, n: int) -> HostileRecord:
        name = self.hostile_name("utf8", n)
        headers = (
            ("seq", b"1"),
            ("group", b"\xff\xfe"),
            ("member", b"\xc3\x28"),
            ("x-bin", b"\x80"),
        )
        return self._keyed(
            "raw.non_utf8_header", "raw", name, self._price(name, 1), headers=headers
        )

    def _raw_publish_ns_superscript(self, n: int) -> HostileRecord:
        name = self.hostile_name("sup", n)
        headers = (*self._raw_headers()[:3], ("publish_ns", "²³".encode()))
        return self._keyed(
            "raw.publish_ns_superscript", "raw", name, self._price(name, 1), headers=headers
        )

    def _raw_invalid_json(self, n: int) -> HostileRecord:
        bad = [b"{not json", b"\xff\xfe garbage", b"", b"[1,2", b"null"]
        return self._keyed(
            "raw.invalid_json",
            "raw",
            self._real(n),
            bad[n % len(bad)],
            headers=self._raw_headers(),
        )

    def _raw_wrong_types(self, n: int) -> HostileRecord:
        sym = self._real(n)
        price = orjson.loads(self._price(sym, 1))
        variants = [{**price, "seq": "1"}, {**price, "mid": None}, {**price, "instrument": 7}]
        if self.epoch is not None:
            variants.append({**price, "epoch": 1.5})
        value = _json(variants[n % len(variants)])
        return self._keyed("raw.wrong_types", "raw", sym, value, headers=self._raw_headers())

    def _raw_huge_numbers(self, n: int) -> HostileRecord:
        sym = self._real(n)
        tail = b'"instrument":"%s","source_time_ns":1,"bid":1,"ask":2' % sym.encode()
        variants = [
            b'{%s,"mid":1e400,"seq":1}' % tail,
            b'{%s,"mid":1.5,"seq":%d}' % (tail, 10**400),
            b'{%s,"mid":1.5,"seq":%d}' % (tail, 2**63),
        ]
        return self._keyed(
            "raw.huge_numbers",
            "raw",
            sym,
            variants[n % len(variants)],
            headers=self._raw_headers(),
        )

    def _raw_deep_nesting(self, n: int) -> HostileRecord:
        sym = self._real(n)
        value = b'{"instrument":"%s","seq":1,"bid":%s}' % (sym.encode(), nested())
        return self._keyed("raw.deep_nesting", "raw", sym, value, headers=self._raw_headers())

    def _raw_forged_headers(self, n: int) -> HostileRecord:
        name = self.hostile_name("hdr", n)
        headers = (
            ("seq", str(MAX_SEQ).encode()),
            ("group", b"p1"),
            ("member", b"forged"),
            ("publish_ns", str(time.time_ns()).encode()),
            ("pricing-ha-control", [b"takeover", b"release", b"checkpoint"][n % 3]),
            ("term", b"0"),
            ("x-forged", b"1"),
            ("x-unknown-0", b"2"),
        )
        return self._keyed("raw.forged_headers", "raw", name, self._price(name, 1), headers=headers)

    def _raw_forged_control(self, n: int) -> HostileRecord:
        kinds = [b"takeover", b"release", b"handover", b"checkpoint", b"kept"]
        headers = (
            ("pricing-ha-control", kinds[n % len(kinds)]),
            ("term", b"0"),
            ("marker", b"forged"),
            ("before", b"clean"),
        )
        value = b'{"position":9223372036854775807,"marks":{}}' if n % 5 == 3 else b""
        return HostileRecord("raw.forged_control", "raw", n % self.partitions, None, value, headers)

    def _raw_seq_max(self, n: int) -> HostileRecord:
        sym = self._real(n)
        return self._keyed(
            "raw.seq_max", "raw", sym, self._price(sym, MAX_SEQ), headers=self._raw_headers(MAX_SEQ)
        )

    def _raw_flood(self, n: int) -> HostileRecord:
        name = self.flood_name(n)
        return self._keyed(
            "raw.flood", "raw", name, self._price(name, 1), headers=self._raw_headers()
        )

    def _neli_record(self, kind: str, n: int) -> HostileRecord:
        partition, value = neli_value(kind, n, self.partitions, self.groups, self._tag)
        return HostileRecord(kind, "neli", partition, None, value)

    _neli_invalid_json = functools.partialmethod(_neli_record, "neli.invalid_json")
    _neli_huge_numbers = functools.partialmethod(_neli_record, "neli.huge_numbers")
    _neli_deep_nesting = functools.partialmethod(_neli_record, "neli.deep_nesting")
    _neli_future_timestamps = functools.partialmethod(_neli_record, "neli.future_timestamps")
    _neli_forged_relay_heartbeat = functools.partialmethod(
        _neli_record, "neli.forged_relay_heartbeat"
    )

    # -- the schedule ------------------------------------------------------------------------

    def second(self, i: int, duration_s: int) -> list[HostileRecord]:
        """The records of second ``i`` of a run of ``duration_s`` seconds, interleaved.

        With :attr:`only` set, just those classes (to see one class's effect on its own).
        """
        steady = [
            self.make(kind)
            for kind, (_, rate) in RATES.items()
            if self.wanted(kind)
            for _ in range(rate)
        ]
        scheduled: list[HostileRecord] = []
        if i % 10 == 3 and self.wanted("quote.oversized"):  # six 600 KB quotes in a minute
            scheduled.append(self.make("quote.oversized"))
        half = len(self.real) // 2
        if i == min(10, duration_s // 4) and self.wanted("quote.seq_max"):
            # seq 2^63-1: half the symbols on md.quotes, the other half on prices.raw
            scheduled += [self._scheduled("quote.seq_max", k) for k in range(half)]
        if i == min(12, duration_s // 3) and self.wanted("raw.seq_max"):
            scheduled += [self._scheduled("raw.seq_max", k) for k in range(half, len(self.real))]
        # Interleave the classes so that every slice of the second carries every class.
        random.Random(i).shuffle(steady)
        return scheduled + steady

    def _scheduled(self, kind: str, index: int) -> HostileRecord:
        """A record of ``kind`` for real instrument ``index`` (each gets exactly one)."""
        maker = self._quote_seq_max if kind == "quote.seq_max" else self._raw_seq_max
        return maker(index)
