"""Market-data quotes: the wire format of ``md.quotes``, its validation and sequence checking.

A quote is a JSON object keyed (Kafka key) by its instrument::

    {"instrument": "EURUSD", "epoch": 1717171000000, "seq": 17, "bid": 1.08501,
     "ask": 1.08503, "source_time_ns": 1717171717000000000}

``seq`` is the source's per-instrument sequence number: it starts anywhere >= 1 and increases by
one per quote; ``epoch`` is the feed's start time in Unix milliseconds (0 when absent: an older
feed), so a restarted feed starts a new epoch and numbers from 1 again. ``(epoch, seq)``, in that
order, is the pipeline's dedupe key (docs/architecture.md, "Sequence epochs";
:mod:`pricing_ha.publishing.epochs`). Unknown extra fields are ignored, so sources may add fields
without breaking publishers.

Validation is split in two: :func:`parse_quote` is stateless (one message on its own), and
:class:`SequenceGuard` is the small stateful check that a publisher keeps per instrument
(a repeated or backward ``(epoch, seq)`` is rejected; forward gaps are accepted and reported, up
to a bound; a jump beyond it is accepted only when the next quote continues from it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import orjson

from pricing_ha import wire
from pricing_ha.errors import PricingError
from pricing_ha.publishing._wire import WireFormatError, get_float, get_int, get_str, load_object
from pricing_ha.publishing.epochs import (
    MAX_EPOCH,
    describe,
    epoch_of,
    out_of_bounds,
    position,
    seq_in_epoch,
)

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


class Quote(wire.Quote, frozen=True, kw_only=True):
    """One market-data quote: the wire contract's quote (:class:`pricing_ha.wire.Quote`).

    Construction does not validate (tests and generators build quotes freely); use
    :func:`validate_quote` or :func:`parse_quote` on untrusted data. A frozen struct rather
    than a frozen dataclass: created in C (also straight from JSON by :func:`parse_quote`),
    several times cheaper, at one per quote on each publisher's hot path.

    Attributes:
        instrument: the symbol, also the Kafka key.
        seq: the source's per-instrument sequence number (>= 1).
        bid: best bid (> 0).
        ask: best ask (>= bid).
        source_time_ns: when the source produced the quote, Unix epoch nanoseconds.
        epoch: the feed's epoch (its start, Unix milliseconds; 0 for a feed without epochs).
    """


def validate_quote(q: Quote) -> Quote:
    """Checks a quote's own consistency (not its sequence against earlier quotes).

    Returns:
        ``q`` unchanged, so the call can be chained.

    Raises:
        InvalidQuoteError: blank or overlong instrument, ``seq`` or ``epoch`` out of range,
            non-finite or
            non-positive bid, non-finite ask, crossed market (bid > ask), negative source time.
    """
    if not q.instrument or not q.instrument.isprintable() or q.instrument != q.instrument.strip():
        raise InvalidQuoteError(f"instrument {q.instrument!r} is blank or not printable")
    if len(q.instrument) > _MAX_SYMBOL_LEN:
        raise InvalidQuoteError(f"instrument longer than {_MAX_SYMBOL_LEN} characters")
    if not 1 <= q.seq <= MAX_SEQ:
        raise InvalidQuoteError(f"seq must be in 1..2^63-1, got {q.seq}")
    if not 0 <= q.epoch <= MAX_EPOCH:
        raise InvalidQuoteError(f"epoch must be in 0..2^63-1, got {q.epoch}")
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
        # The wire contract's rules decode a well-formed quote in one pass, straight into a
        # Quote; anything refused is read again by the strict reader below, which says
        # precisely what is wrong.
        quote = _QUOTE.decode(value)
    except msgspec.MsgspecError:
        quote = _parse_slowly(value)
    validate_quote(quote)
    if key is None:
        raise InvalidQuoteError("message has no key; quotes must be keyed by instrument")
    if key != quote.instrument.encode():
        shown = key.decode(errors="backslashreplace")
        raise InvalidQuoteError(f"key {shown!r} does not match instrument {quote.instrument!r}")
    return quote


_QUOTE = msgspec.json.Decoder(Quote)


def _parse_slowly(value: bytes) -> Quote:
    """A quote the typed decoder refused, read field by field for the reason it is invalid."""
    try:
        obj = load_object(value)
        quote = Quote(
            instrument=get_str(obj, "instrument"),
            seq=get_int(obj, "seq"),
            bid=get_float(obj, "bid"),
            ask=get_float(obj, "ask"),
            source_time_ns=get_int(obj, "source_time_ns"),
            epoch=get_int(obj, "epoch") if "epoch" in obj else 0,
        )
    except WireFormatError as exc:
        raise InvalidQuoteError(str(exc)) from exc
    return quote


def encode_quote(q: Quote) -> bytes:
    """Serialises a quote as compact JSON with a fixed field order."""
    return orjson.dumps(
        {
            "instrument": q.instrument,
            "epoch": q.epoch,
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
    """Remembers the last accepted ``(epoch, seq)`` per instrument and rejects non-increasing ones.

    The first quote of an instrument is accepted whatever its ``seq`` (a leader taking over
    resumes mid-stream). A later epoch starts a new stream (the feed restarted). Forward gaps are
    accepted: the missing quotes are lost upstream, and refusing newer prices would only make
    things worse; the gap is reported so it can be counted and traced.

    With bounds (``max_seq_jump``), one record cannot move an instrument far ahead on its own:

    * a quote whose epoch is more than ``max_epoch_skew_ms`` ahead of ``clock_ms()`` is rejected;
    * a quote that jumps further than ``max_seq_jump`` (a new epoch counts from 0) is rejected,
      and remembered: the next quote of the instrument is accepted if it continues from it
      (same epoch, seq + 1), the feed's stream having really moved there. A forged quote is
      then one dead-lettered record, and the stream goes on; a real jump costs its first quote
      (in the dead-letter topic, with the reason). Both groups see the same quotes in the same
      order, so both decide the same, and the relay sees the continuing quote from both.

    It remembers at most ``limit`` instruments: past that, the least recently quoted one is
    forgotten (``evicted`` counts them), so a flood of new names cannot grow it. Forgetting
    loses nothing and duplicates nothing downstream: a forgotten instrument's next quote is
    accepted as if first, and a repeated seq priced that way is dropped by the relay's mark,
    which the relay never forgets.

    Not thread-safe: one guard per consuming task.
    """

    def __init__(
        self,
        limit: int | None = None,
        *,
        max_seq_jump: int | None = None,
        max_epoch_skew_ms: int = 0,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        """Creates an empty guard.

        Args:
            limit: the most instruments remembered (``limits.max_instruments_per_partition``).
            max_seq_jump: the largest forward jump accepted at once; ``None``: no bounds.
            max_epoch_skew_ms: how far ahead of ``clock_ms()`` an epoch may be (with bounds).
            clock_ms: the wall clock, Unix milliseconds (default: the system's).
        """
        self._last: dict[str, int] = {}
        self._limit = limit
        self._jumped: dict[str, int] = {}  # instrument -> a rejected jump's position
        self._max_jump = max_seq_jump
        self._skew_ms = max_epoch_skew_ms
        self._clock_ms = clock_ms or _system_ms
        self.gaps = 0
        """Total sequence numbers skipped over all instruments since creation."""
        self.evicted = 0
        """Instruments forgotten to stay within ``limit``."""

    def check(self, instrument: str, seq: int, epoch: int = 0) -> SeqCheck:
        """Checks ``(epoch, seq)`` against the last accepted one and records it when accepted.

        Args:
            instrument: the quote's instrument.
            seq: the quote's sequence number.
            epoch: the quote's epoch.

        Returns:
            A rejection with the reason for a repeated or backward position, or one out of
            bounds (see the class docstring), else an acceptance with the size of the forward
            gap (a new epoch's gap counts from its seq 1).
        """
        pos = position(epoch, seq)
        last_seqs = self._last
        # Popped and put back: the dict's order is then least recently quoted first.
        last = last_seqs.pop(instrument, None)
        if (
            last is not None
            and pos > last
            and epoch_of(last) == epoch
            and self._max_jump is not None
            and instrument not in self._jumped
        ):
            # The common case, decided as below without the general bounds check: the next
            # seq(s) of the same epoch, within the jump bound and the epoch within the skew.
            step = seq - seq_in_epoch(last)
            if step <= self._max_jump and epoch <= self._clock_ms() + self._skew_ms:
                last_seqs[instrument] = pos
                if step == 1:
                    return _CONTIGUOUS
                self.gaps += step - 1
                return SeqCheck(None, step - 1)
        return self._check_slowly(instrument, seq, epoch, pos, last)

    def _check_slowly(
        self, instrument: str, seq: int, epoch: int, pos: int, last: int | None
    ) -> SeqCheck:
        """:meth:`check` in general (``last`` already popped from the remembered ones)."""
        last_seqs = self._last
        if last is not None and pos <= last:
            last_seqs[instrument] = last
            kind = "repeated" if pos == last else "backward"
            return SeqCheck(
                f"{kind} seq {describe(pos)} for {instrument} (last accepted {describe(last)})"
            )
        refused = self._out_of_bounds(instrument, pos, last)
        if refused is not None:
            if last is not None:
                last_seqs[instrument] = last
            return SeqCheck(refused)
        if last is None:
            gap = 0
        elif epoch_of(last) == epoch:
            gap = seq - seq_in_epoch(last) - 1
        else:
            gap = seq - 1
        last_seqs[instrument] = pos
        if last is None and self._limit is not None and len(last_seqs) > self._limit:
            oldest = next(iter(last_seqs))
            del last_seqs[oldest]
            self._jumped.pop(oldest, None)
            self.evicted += 1
        self.gaps += gap
        return SeqCheck(None, gap)

    def _out_of_bounds(self, instrument: str, pos: int, last: int | None) -> str | None:
        """Why ``pos`` is refused by the bounds (see the class docstring), or ``None``."""
        jumped = self._jumped.pop(instrument, None)
        if self._max_jump is None:
            return None
        reason = out_of_bounds(
            last or 0,
            pos,
            now_ms=self._clock_ms(),
            max_seq_jump=self._max_jump,
            max_epoch_skew_ms=self._skew_ms,
        )
        if reason is not None and reason.startswith("epoch"):
            return f"{instrument} seq {describe(pos)}: {reason}"
        if reason is not None and last is not None and jumped != pos - 1:
            self._jumped[instrument] = pos
            return (
                f"{instrument} seq {describe(pos)}: {reason}; "
                "accepted only if the next quote continues from it"
            )
        return None

    def __len__(self) -> int:
        """How many instruments are remembered."""
        return len(self._last)

    def last(self, instrument: str) -> int | None:
        """Returns the last accepted position of ``instrument`` (its seq in epoch 0; see
        :func:`pricing_ha.publishing.epochs.position`), or ``None`` if none yet."""
        return self._last.get(instrument)

    def forget(self, instruments: set[str] | None = None) -> None:
        """Drops the state of ``instruments`` (all if ``None``), e.g. when leadership ends."""
        if instruments is None:
            self._last.clear()
            self._jumped.clear()
        else:
            for instrument in instruments:
                self._last.pop(instrument, None)
                self._jumped.pop(instrument, None)


_CONTIGUOUS = SeqCheck(None, 0)  # the verdict on the next seq (immutable: shared)


def _system_ms() -> int:
    return time.time_ns() // 1_000_000
