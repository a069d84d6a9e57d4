"""Market-data quotes: the wire format of ``md.quotes``, its validation and sequence checking.

A quote is a JSON object keyed (Kafka key) by its instrument::

    {"instrument": "EURUSD", "seq": 17, "bid": 1.08501, "ask": 1.08503,
     "source_time_ns": 1717171717000000000}

``seq`` is the source's per-instrument sequence number: it starts anywhere >= 1 and increases by
one per quote; it is the pipeline's dedupe key (docs/architecture.md §2). Unknown extra fields are
ignored, so sources may add fields without breaking publishers.

Validation is split in two: :func:`parse_quote` is stateless (one message on its own), and
:class:`SequenceGuard` is the small stateful check that a publisher keeps per instrument
(repeated or backward ``seq`` is rejected; forward gaps are accepted and reported).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import orjson

from pricing_ha.errors import PricingError
from pricing_ha.publishing._wire import WireFormatError, get_float, get_int, get_str, load_object

__all__ = [
    "MAX_SEQ",
    "InvalidQuoteError",
    "Quote",
    "SeqCheck",
    "SequenceGuard",
    "encode_quote",
    "parse_quote",
    "validate_quote",
]

MAX_SEQ = 2**63 - 1
"""Largest accepted ``seq``: it must fit Kafka headers, Spark ``LongType`` and Parquet int64."""

_MAX_SYMBOL_LEN = 64


class InvalidQuoteError(PricingError):
    """A quote cannot be priced; it belongs on the dead-letter topic.

    Attributes:
        reason: a short, human-readable reason, suitable for the DLQ ``reason`` header.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, kw_only=True, slots=True)
class Quote:
    """One market-data quote.

    Construction does not validate (tests and generators build quotes freely); use
    :func:`validate_quote` or :func:`parse_quote` on untrusted data.

    Attributes:
        instrument: the symbol, also the Kafka key.
        seq: the source's per-instrument sequence number (>= 1).
        bid: best bid (> 0).
        ask: best ask (>= bid).
        source_time_ns: when the source produced the quote, Unix epoch nanoseconds.
    """

    instrument: str
    seq: int
    bid: float
    ask: float
    source_time_ns: int


def validate_quote(q: Quote) -> Quote:
    """Checks a quote's own consistency (not its sequence against earlier quotes).

    Returns:
        ``q`` unchanged, so the call can be chained.

    Raises:
        InvalidQuoteError: blank or overlong instrument, ``seq`` out of range, non-finite or
            non-positive bid, non-finite ask, crossed market (bid > ask), negative source time.
    """
    if not q.instrument or not q.instrument.isprintable() or q.instrument != q.instrument.strip():
        raise InvalidQuoteError(f"instrument {q.instrument!r} is blank or not printable")
    if len(q.instrument) > _MAX_SYMBOL_LEN:
        raise InvalidQuoteError(f"instrument longer than {_MAX_SYMBOL_LEN} characters")
    if not 1 <= q.seq <= MAX_SEQ:
        raise InvalidQuoteError(f"seq must be in 1..2^63-1, got {q.seq}")
    if not (math.isfinite(q.bid) and math.isfinite(q.ask)):
        raise InvalidQuoteError(f"non-finite price: bid={q.bid!r} ask={q.ask!r}")
    if q.bid <= 0:
        raise InvalidQuoteError(f"bid must be positive, got {q.bid!r}")
    if q.bid > q.ask:
        raise InvalidQuoteError(f"crossed quote: bid {q.bid!r} > ask {q.ask!r}")
    if q.source_time_ns < 0:
        raise InvalidQuoteError(f"source_time_ns must be >= 0, got {q.source_time_ns}")
    return q


def parse_quote(value: bytes | None, key: bytes | None) -> Quote:
    """Decodes and validates one ``md.quotes`` message.

    Args:
        value: the message value (JSON).
        key: the message key; must be the UTF-8 instrument symbol (an unkeyed quote could sit
            on any partition and so be priced by the wrong leader).

    Returns:
        The quote.

    Raises:
        InvalidQuoteError: with the reason, for anything that cannot be priced.
    """
    if value is None:
        raise InvalidQuoteError("empty message value")
    try:
        obj = load_object(value)
        quote = Quote(
            instrument=get_str(obj, "instrument"),
            seq=get_int(obj, "seq"),
            bid=get_float(obj, "bid"),
            ask=get_float(obj, "ask"),
            source_time_ns=get_int(obj, "source_time_ns"),
        )
    except WireFormatError as exc:
        raise InvalidQuoteError(str(exc)) from exc
    validate_quote(quote)
    if key is None:
        raise InvalidQuoteError("message has no key; quotes must be keyed by instrument")
    if key != quote.instrument.encode():
        shown = key.decode(errors="backslashreplace")
        raise InvalidQuoteError(f"key {shown!r} does not match instrument {quote.instrument!r}")
    return quote


def encode_quote(q: Quote) -> bytes:
    """Serialises a quote as compact JSON with a fixed field order."""
    return orjson.dumps(
        {
            "instrument": q.instrument,
            "seq": q.seq,
            "bid": q.bid,
            "ask": q.ask,
            "source_time_ns": q.source_time_ns,
        }
    )


@dataclass(frozen=True, slots=True)
class SeqCheck:
    """The verdict of :meth:`SequenceGuard.check`.

    Attributes:
        reason: why the quote is rejected, or ``None`` if it is accepted.
        gap: how many sequence numbers were skipped before an accepted quote (0 when
            contiguous, and for an instrument's first quote).
    """

    reason: str | None
    gap: int = 0

    @property
    def ok(self) -> bool:
        """Whether the quote is accepted."""
        return self.reason is None


class SequenceGuard:
    """Remembers the last accepted ``seq`` per instrument and rejects non-increasing ones.

    The first quote of an instrument is accepted whatever its ``seq`` (a leader taking over
    resumes mid-stream). Forward gaps are accepted: the missing quotes are lost upstream, and
    refusing newer prices would only make things worse; the gap is reported so it can be counted
    and traced. Not thread-safe: one guard per consuming task.

    It remembers at most ``limit`` instruments: past that, the least recently quoted one is
    forgotten (``evicted`` counts them), so a flood of new names cannot grow it. Forgetting
    loses nothing and duplicates nothing downstream: a forgotten instrument's next quote is
    accepted as if first, and a repeated seq priced that way is dropped by the relay's mark,
    which the relay never forgets.

    Args:
        limit: the most instruments remembered (``limits.max_instruments_per_partition``).
    """

    def __init__(self, limit: int | None = None) -> None:
        """Creates an empty guard."""
        self._last: dict[str, int] = {}
        self._limit = limit
        self.gaps = 0
        """Total sequence numbers skipped over all instruments since creation."""
        self.evicted = 0
        """Instruments forgotten to stay within ``limit``."""

    def check(self, instrument: str, seq: int) -> SeqCheck:
        """Checks ``seq`` against the last accepted one and records it when accepted.

        Args:
            instrument: the quote's instrument.
            seq: the quote's sequence number.

        Returns:
            A rejection with the reason for a repeated or backward ``seq``, else an acceptance
            with the size of the forward gap.
        """
        last_seqs = self._last
        # Popped and put back: the dict's order is then least recently quoted first.
        last = last_seqs.pop(instrument, None)
        if last is not None and seq <= last:
            last_seqs[instrument] = last
            kind = "repeated" if seq == last else "backward"
            return SeqCheck(f"{kind} seq {seq} for {instrument} (last accepted {last})")
        gap = 0 if last is None else seq - last - 1
        last_seqs[instrument] = seq
        if last is None and self._limit is not None and len(last_seqs) > self._limit:
            del last_seqs[next(iter(last_seqs))]
            self.evicted += 1
        self.gaps += gap
        return SeqCheck(None, gap)

    def __len__(self) -> int:
        """How many instruments are remembered."""
        return len(self._last)

    def last(self, instrument: str) -> int | None:
        """Returns the last accepted ``seq`` of ``instrument``, or ``None`` if none yet."""
        return self._last.get(instrument)

    def forget(self, instruments: set[str] | None = None) -> None:
        """Drops the state of ``instruments`` (all if ``None``), e.g. when leadership ends."""
        if instruments is None:
            self._last.clear()
        else:
            for instrument in instruments:
                self._last.pop(instrument, None)
