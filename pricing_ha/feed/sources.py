"""Quote sources for ``pricing-ha feed``: a deterministic synthetic market, and CSV replay.

Both are pure iterators of :class:`~pricing_ha.publishing.quotes.Quote` with no Kafka in sight; the
producing loop (pacing, delivery, summary) is :mod:`pricing_ha.feed.producer`.

The synthetic market is a random walk on integer price units (no floats accumulate), driven by
one ``random.Random(seed)``; the sequence of ``(instrument, seq, bid, ask)`` is a pure function
of the seed and the symbol list. ``source_time_ns`` is the only input from outside: it is taken
from an injected clock when each round is generated.
"""

from __future__ import annotations

import csv
import dataclasses
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from pricing_ha.config import FeedConfig
from pricing_ha.errors import PricingError
from pricing_ha.publishing.quotes import InvalidQuoteError, Quote, SequenceGuard, validate_quote

__all__ = [
    "REPLAY_COLUMNS",
    "FeedSummary",
    "InstrumentTally",
    "ReplayError",
    "SyntheticMarket",
    "default_symbols",
    "feed_symbols",
    "read_replay",
]

# Real-looking majors first: (symbol, decimals, starting price in units of 10**-decimals).
_MAJORS: tuple[tuple[str, int, int], ...] = (
    ("EURUSD", 5, 108_500),
    ("USDJPY", 3, 151_200),
    ("GBPUSD", 5, 126_900),
    ("AUDUSD", 5, 65_800),
    ("USDCHF", 5, 88_300),
    ("USDCAD", 5, 136_400),
    ("NZDUSD", 5, 60_100),
    ("EURGBP", 5, 85_500),
    ("EURJPY", 3, 164_000),
    ("GBPJPY", 3, 191_800),
)
_MAJOR_SPECS = {symbol: (decimals, start) for symbol, decimals, start in _MAJORS}
_OTHER_DECIMALS = 2
_MAX_STEP_UNITS = 3  # largest move of mid per quote, in price units
_MAX_SPREAD_UNITS = 3
_FLOOR_UNITS = 100  # the walk never goes below this, so bid stays well above zero

REPLAY_COLUMNS = ("instrument", "seq", "bid", "ask", "source_time_ns")
"""Replay CSV columns; the last is optional (the send time is used when it is missing)."""


def default_symbols(count: int) -> tuple[str, ...]:
    """Returns ``count`` symbols: the ten FX majors, then ``SYM001``, ``SYM002``, ...

    Examples:
        >>> default_symbols(3)
        ('EURUSD', 'USDJPY', 'GBPUSD')
        >>> default_symbols(12)[-2:]
        ('SYM001', 'SYM002')
    """
    majors = tuple(symbol for symbol, _, _ in _MAJORS[:count])
    others = count - len(majors)
    width = max(3, len(str(others)))
    return majors + tuple(f"SYM{i:0{width}d}" for i in range(1, others + 1))


def feed_symbols(cfg: FeedConfig) -> tuple[str, ...]:
    """Returns the configured symbols, or ``cfg.instruments`` generated ones."""
    return cfg.symbols if cfg.symbols is not None else default_symbols(cfg.instruments)


@dataclass(slots=True)
class _Walk:
    decimals: int
    mid_units: int
    seq: int = 0
    scale: int = 0  # 10 ** decimals

    def __post_init__(self) -> None:
        self.scale = 10**self.decimals


class SyntheticMarket:
    """A deterministic random-walk market over a fixed list of instruments.

    Each round quotes every instrument once, in an order shuffled per round; each instrument's
    ``seq`` starts at 1 and increases by one per quote, every quote stamped with ``epoch``.
    """

    def __init__(self, symbols: Sequence[str], seed: int, epoch: int = 0) -> None:
        """Creates the market.

        Args:
            epoch: the feed's epoch stamped on every quote (its start time, Unix ms; see
                :mod:`pricing_ha.publishing.epochs`).
            symbols: distinct instrument symbols. Known FX majors start at realistic prices
                with 5 (3 for JPY) decimals; others start between 10.00 and 500.00.
            seed: the random seed.

        Raises:
            ValueError: if ``symbols`` is empty or has duplicates.
        """
        if not symbols or len(set(symbols)) != len(symbols):
            raise ValueError("symbols must be non-empty and distinct")
        self._rng = random.Random(seed)
        self.epoch = epoch
        self._order = list(symbols)
        self._walks: dict[str, _Walk] = {}
        for symbol in symbols:
            decimals, start = _MAJOR_SPECS.get(symbol, (_OTHER_DECIMALS, 0))
            if not start:
                start = self._rng.randint(1_000, 50_000)
            self._walks[symbol] = _Walk(decimals=decimals, mid_units=start)

    @property
    def symbols(self) -> tuple[str, ...]:
        """The instruments, in the order given at construction."""
        return tuple(self._walks)

    def next_round(self, source_time_ns: int) -> list[Quote]:
        """Advances every instrument by one quote.

        Args:
            source_time_ns: the source time stamped on this round's quotes.

        Returns:
            One quote per instrument, in this round's (seeded) order.
        """
        return [
            Quote(
                instrument=symbol,
                seq=seq,
                bid=bid,
                ask=ask,
                source_time_ns=source_time_ns,
                epoch=self.epoch,
            )
            for symbol, seq, bid, ask in self._round()
        ]

    def _round(self) -> list[tuple[str, int, float, float]]:
        """One round's ``(symbol, seq, bid, ask)``, in its shuffled order.

        The draws are ``random.Random``'s own: ``shuffle``, then per instrument
        ``randint(-_MAX_STEP_UNITS, _MAX_STEP_UNITS)`` and ``randint(1, _MAX_SPREAD_UNITS)``,
        each made as ``randint`` makes it (``getrandbits`` of the width's bit length, redrawn
        while out of range: CPython's ``_randbelow_with_getrandbits``), without its argument
        checks. Integer draws only, so the walk is the same on every platform and build.
        """
        rng = self._rng
        rng.shuffle(self._order)
        bits = rng.getrandbits
        step_width, spread_width = 2 * _MAX_STEP_UNITS + 1, _MAX_SPREAD_UNITS
        step_k, spread_k = step_width.bit_length(), spread_width.bit_length()
        walks = self._walks
        out = []
        for symbol in self._order:
            walk = walks[symbol]
            r = bits(step_k)
            while r >= step_width:
                r = bits(step_k)
            mid = walk.mid_units + r - _MAX_STEP_UNITS
            walk.mid_units = mid = max(_FLOOR_UNITS, mid)
            r = bits(spread_k)
            while r >= spread_width:
                r = bits(spread_k)
            walk.seq += 1
            scale = walk.scale
            # int / int is correctly rounded: the float nearest the decimal price.
            out.append((symbol, walk.seq, mid / scale, (mid + 1 + r) / scale))
        return out

    def quotes(self, clock_ns: Callable[[], int] = time.time_ns) -> Iterator[Quote]:
        """Yields quotes forever, round after round.

        Each quote is stamped with ``clock_ns()`` when it is yielded (i.e. sent, when the
        consumer is the producing loop), so downstream latency measures the pipeline only.
        """
        epoch = self.epoch
        while True:
            for symbol, seq, bid, ask in self._round():
                yield Quote(
                    instrument=symbol,
                    seq=seq,
                    bid=bid,
                    ask=ask,
                    source_time_ns=clock_ns(),
                    epoch=epoch,
                )


class ReplayError(PricingError):
    """A replay CSV file is unreadable or has a bad row.

    Attributes:
        path: the file.
        line: the 1-based line of the bad row (0 when the file itself is the problem).
        problem: what is wrong.
    """

    def __init__(self, path: Path, line: int, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {problem}")


def _cell(cells: list[str], index: int, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(cells[index])
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"{REPLAY_COLUMNS[index]} is not {what}: {cells[index]!r}") from None


def _parse_row(row: list[str], clock_ns: Callable[[], int]) -> Quote:
    if len(row) not in (4, 5):
        raise ValueError(f"expected 4 or 5 columns ({','.join(REPLAY_COLUMNS)}), got {len(row)}")
    cells = [cell.strip() for cell in row]
    return Quote(
        instrument=cells[0],
        seq=int(_cell(cells, 1, int)),
        bid=float(_cell(cells, 2, float)),
        ask=float(_cell(cells, 3, float)),
        source_time_ns=int(_cell(cells, 4, int)) if len(cells) == 5 else clock_ns(),
    )


def read_replay(path: Path, clock_ns: Callable[[], int] = time.time_ns) -> Iterator[Quote]:
    """Reads quotes from a CSV file, validating every row as it goes.

    The columns are ``instrument,seq,bid,ask[,source_time_ns]``; a header row with these names
    is optional, blank lines and lines starting with ``#`` are skipped. Each instrument's
    ``seq`` must increase (gaps are allowed). Rows without ``source_time_ns`` are stamped with
    ``clock_ns()`` when they are read, i.e. when the feed sends them.

    Raises:
        ReplayError: naming the file and line, for an unreadable file or the first bad row.
    """
    guard = SequenceGuard()
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            first = True
            for row in reader:
                line = reader.line_num
                if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                    continue
                if first and row[0].strip().lower() == REPLAY_COLUMNS[0]:
                    first = False
                    header = tuple(cell.strip().lower() for cell in row)
                    if header not in (REPLAY_COLUMNS[:4], REPLAY_COLUMNS):
                        raise ReplayError(
                            path, line, f"header must be {','.join(REPLAY_COLUMNS)} (last optional)"
                        )
                    continue
                first = False
                try:
                    quote = validate_quote(_parse_row(row, clock_ns))
                except (ValueError, InvalidQuoteError) as exc:
                    raise ReplayError(path, line, str(exc)) from exc
                verdict = guard.check(quote.instrument, quote.seq)
                if verdict.reason is not None:
                    raise ReplayError(path, line, verdict.reason)
                yield quote
    except OSError as exc:
        raise ReplayError(path, 0, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ReplayError(path, 0, f"not UTF-8 text: {exc}") from exc
    except csv.Error as exc:
        raise ReplayError(path, 0, f"malformed CSV: {exc}") from exc


@dataclass(slots=True)
class InstrumentTally:
    """What the feed sent for one instrument.

    Attributes:
        produced: quotes handed to the producer.
        delivered: quotes the broker acknowledged.
        failed: quotes whose delivery failed.
        first_seq: lowest acknowledged seq, or ``None``.
        last_seq: highest acknowledged seq, or ``None``.
    """

    produced: int = 0
    delivered: int = 0
    failed: int = 0
    first_seq: int | None = None
    last_seq: int | None = None


@dataclass(slots=True)
class FeedSummary:
    """The feed's final state: per-instrument counts and last delivered seq.

    Attributes:
        topic: where the quotes went.
        instruments: tallies by symbol.
        errors: the first few delivery errors, verbatim.
    """

    topic: str
    instruments: dict[str, InstrumentTally] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: Failed deliveries so far, all instruments (kept as it goes: the feed reads it for
    #: every quote, and summing the tallies cost O(instruments) each time).
    failed: int = 0

    def on_produced(self, quote: Quote) -> None:
        """Counts a quote handed to the producer."""
        tally = self.instruments.get(quote.instrument)
        if tally is None:  # (no setdefault: it would build a tally for every quote)
            tally = self.instruments[quote.instrument] = InstrumentTally()
        tally.produced += 1

    def on_delivered(self, instrument: str, seq: int) -> None:
        """Counts an acknowledged quote."""
        tally = self.instruments.get(instrument)
        if tally is None:
            tally = self.instruments[instrument] = InstrumentTally()
        tally.delivered += 1
        first, last = tally.first_seq, tally.last_seq
        if first is None or seq < first:
            tally.first_seq = seq
        if last is None or seq > last:
            tally.last_seq = seq

    def on_failed(self, instrument: str, seq: int, error: str) -> None:
        """Counts a quote whose delivery failed, keeping the first few errors."""
        self.instruments.setdefault(instrument, InstrumentTally()).failed += 1
        self.failed += 1
        if len(self.errors) < 5:
            self.errors.append(f"{instrument} seq {seq}: {error}")

    @property
    def produced(self) -> int:
        """Total quotes handed to the producer."""
        return sum(t.produced for t in self.instruments.values())

    @property
    def delivered(self) -> int:
        """Total quotes acknowledged."""
        return sum(t.delivered for t in self.instruments.values())

    @property
    def ok(self) -> bool:
        """Whether every produced quote was acknowledged."""
        return self.delivered == self.produced

    def to_json(self) -> bytes:
        """Serialises the summary (sorted keys), for ``--summary-out``."""
        return orjson.dumps(
            {
                "topic": self.topic,
                "produced": self.produced,
                "delivered": self.delivered,
                "failed": self.failed,
                "errors": self.errors,
                "instruments": {
                    symbol: dataclasses.asdict(tally)
                    for symbol, tally in sorted(self.instruments.items())
                },
            },
            option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2,
        )

    def render(self, max_instruments: int = 50) -> str:
        """Returns a human-readable summary (one line per instrument, up to a limit)."""
        lines = [
            f"{self.topic}: produced {self.produced}, delivered {self.delivered}, "
            f"failed {self.failed}, instruments {len(self.instruments)}"
        ]
        for symbol, t in sorted(self.instruments.items())[:max_instruments]:
            lines.append(
                f"  {symbol:<12} delivered {t.delivered:>8}  seq {t.first_seq}..{t.last_seq}"
                + (f"  FAILED {t.failed}" if t.failed else "")
            )
        if len(self.instruments) > max_instruments:
            lines.append(f"  ... {len(self.instruments) - max_instruments} more")
        lines.extend(f"  error: {e}" for e in self.errors)
        return "\n".join(lines)
