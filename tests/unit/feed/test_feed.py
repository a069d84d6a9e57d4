"""The pure parts of the feed: symbols, the synthetic market, CSV replay and the summary."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest

from pricing_ha.config import FeedConfig
from pricing_ha.feed.sources import (
    FeedSummary,
    ReplayError,
    SyntheticMarket,
    default_symbols,
    feed_symbols,
    read_replay,
)
from pricing_ha.publishing.quotes import Quote, validate_quote


def test_default_symbols_start_with_majors_then_numbered() -> None:
    """Generated symbols are FX majors first, then SYM001, SYM002, ..."""
    assert default_symbols(2) == ("EURUSD", "USDJPY")
    symbols = default_symbols(13)
    assert symbols[:10][0] == "EURUSD"
    assert symbols[10:] == ("SYM001", "SYM002", "SYM003")
    assert len(set(default_symbols(2000))) == 2000
    assert default_symbols(1010)[-1] == "SYM1000"


def test_feed_symbols_prefers_explicit_list() -> None:
    """Configured symbols win over the instrument count."""
    assert feed_symbols(FeedConfig(instruments=3, symbols=("A", "B"))) == ("A", "B")
    assert feed_symbols(FeedConfig(instruments=3)) == default_symbols(3)


def test_market_sequence_is_a_pure_function_of_the_seed() -> None:
    """The first rounds for seed 42 are exactly these (a golden check across platforms)."""
    market = SyntheticMarket(["EURUSD", "USDJPY", "SYM001"], 42)
    got = [(q.instrument, q.seq, q.bid, q.ask) for _ in range(2) for q in market.next_round(0)]
    assert got == [
        ("USDJPY", 1, 151.202, 151.204),
        ("SYM001", 1, 429.03, 429.04),
        ("EURUSD", 1, 1.08498, 1.08501),
        ("SYM001", 2, 429.04, 429.06),
        ("EURUSD", 2, 1.08495, 1.08496),
        ("USDJPY", 2, 151.199, 151.2),
    ]


def test_same_seed_same_quotes_other_seed_other_quotes() -> None:
    """Two markets with one seed agree; a different seed diverges."""
    symbols = default_symbols(15)

    def run(seed: int) -> list[tuple[str, int, float, float]]:
        market = SyntheticMarket(symbols, seed)
        return [
            (q.instrument, q.seq, q.bid, q.ask) for _ in range(50) for q in market.next_round(0)
        ]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_market_quotes_are_valid_with_contiguous_seqs() -> None:
    """Every generated quote validates and each instrument's seq goes 1, 2, 3, ..."""
    market = SyntheticMarket(default_symbols(12), 3)
    last: dict[str, int] = {}
    for _ in range(2000):
        for q in market.next_round(0):
            validate_quote(q)
            assert q.ask > q.bid
            assert q.seq == last.get(q.instrument, 0) + 1
            last[q.instrument] = q.seq
    assert set(last.values()) == {2000}


def test_market_stamps_each_quote_with_the_clock() -> None:
    """quotes() takes source_time_ns from the injected clock, one reading per quote."""
    ticks = itertools.count(100)
    quotes = list(itertools.islice(SyntheticMarket(["A", "B"], 1).quotes(lambda: next(ticks)), 4))
    assert [q.source_time_ns for q in quotes] == [100, 101, 102, 103]
    assert sorted((q.instrument, q.seq) for q in quotes) == [("A", 1), ("A", 2), ("B", 1), ("B", 2)]


def test_market_rejects_duplicate_symbols() -> None:
    """Duplicate or missing symbols are a programming error."""
    with pytest.raises(ValueError, match="distinct"):
        SyntheticMarket(["A", "A"], 1)
    with pytest.raises(ValueError, match="distinct"):
        SyntheticMarket([], 1)


def write_csv(tmp_path: Path, text: str) -> Path:
    """Writes a replay file."""
    path = tmp_path / "quotes.csv"
    path.write_text(text)
    return path


def test_replay_reads_rows_with_and_without_source_time(tmp_path: Path) -> None:
    """Rows parse into quotes; a missing source time is taken from the clock."""
    path = write_csv(
        tmp_path,
        "instrument,seq,bid,ask,source_time_ns\n"
        "# a comment\n"
        "\n"
        "EURUSD,1,1.1,1.2,17\n"
        " AAPL , 5, 190.5 ,190.6\n",
    )
    quotes = list(read_replay(path, clock_ns=lambda: 99))
    assert quotes == [
        Quote(instrument="EURUSD", seq=1, bid=1.1, ask=1.2, source_time_ns=17),
        Quote(instrument="AAPL", seq=5, bid=190.5, ask=190.6, source_time_ns=99),
    ]


def test_replay_header_is_optional(tmp_path: Path) -> None:
    """A file without a header is read with the documented column order."""
    path = write_csv(tmp_path, "EURUSD,1,1.1,1.2\nEURUSD,3,1.1,1.2\n")
    assert [q.seq for q in read_replay(path)] == [1, 3]


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("instrument,seq,bid,ask\nEURUSD,1,1.1\n", 2, "expected 4 or 5 columns"),
        ("EURUSD,1,1.1,1.2\nEURUSD,two,1.1,1.2\n", 2, "seq is not an integer: 'two'"),
        ("EURUSD,1,1.1,x\n", 1, "ask is not a number: 'x'"),
        ("EURUSD,1,1.1,1.2,soon\n", 1, "source_time_ns is not an integer"),
        ("\n\nEURUSD,1,1.3,1.2\n", 3, "crossed quote"),
        ("EURUSD,1,nan,1.2\n", 1, "non-finite"),
        ("EURUSD,2,1.1,1.2\nGBPUSD,1,1.1,1.2\nEURUSD,2,1.1,1.2\n", 3, "repeated seq 2"),
        ("instrument,seq,price\n", 1, "header must be"),
    ],
)
def test_replay_errors_name_file_and_line(
    tmp_path: Path, text: str, line: int, problem: str
) -> None:
    """A bad row raises ReplayError with the file, the line and the problem."""
    path = write_csv(tmp_path, text)
    with pytest.raises(ReplayError) as info:
        list(read_replay(path))
    assert info.value.path == path
    assert info.value.line == line
    assert problem in info.value.problem
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_replay_unreadable_file(tmp_path: Path) -> None:
    """A missing or non-UTF-8 file is a ReplayError naming the file."""
    with pytest.raises(ReplayError, match="cannot read"):
        list(read_replay(tmp_path / "absent.csv"))
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"EURUSD,1,1.1,1.2\n\xff\xfe\n")
    with pytest.raises(ReplayError, match="UTF-8"):
        list(read_replay(binary))


def test_summary_counts_and_last_seq() -> None:
    """The summary tallies produced, delivered and failed quotes and the seq range."""
    summary = FeedSummary(topic="md.quotes")
    for seq in (1, 2, 3):
        summary.on_produced(Quote(instrument="A", seq=seq, bid=1, ask=2, source_time_ns=0))
    summary.on_delivered("A", 1)
    summary.on_delivered("A", 3)
    summary.on_failed("A", 2, "broker down")
    tally = summary.instruments["A"]
    assert (tally.produced, tally.delivered, tally.failed) == (3, 2, 1)
    assert (tally.first_seq, tally.last_seq) == (1, 3)
    assert not summary.ok
    assert "A seq 2: broker down" in summary.errors[0]
    assert "FAILED 1" in summary.render()


def test_summary_json_is_machine_readable() -> None:
    """to_json gives totals and per-instrument state that tests and the demo compare."""
    summary = FeedSummary(topic="md.quotes")
    summary.on_produced(Quote(instrument="B", seq=4, bid=1, ask=2, source_time_ns=0))
    summary.on_delivered("B", 4)
    data = orjson.loads(summary.to_json())
    assert data["produced"] == data["delivered"] == 1
    assert data["instruments"]["B"] == {
        "produced": 1,
        "delivered": 1,
        "failed": 0,
        "first_seq": 4,
        "last_seq": 4,
    }
    assert summary.ok


def test_summary_render_truncates_long_lists() -> None:
    """Rendering many instruments is capped and says how many were left out."""
    summary = FeedSummary(topic="t")
    for symbol in default_symbols(60):
        summary.on_delivered(symbol, 1)
    text = summary.render(max_instruments=5)
    assert "... 55 more" in text
    assert len(text.splitlines()) == 7


def test_the_feeds_bytes_for_a_seed_are_pinned() -> None:
    """20,000 encoded quotes of 1,000 instruments (seed 7, epoch 5, a counting clock) hash to the
    value the feed had before its per-quote work was made cheaper: same draws, same bytes."""
    import hashlib

    from pricing_ha.publishing.quotes import encode_quote

    ticks = itertools.count(1_700_000_000_000_000_000, 997)
    market = SyntheticMarket(default_symbols(1000), 7, 5)
    digest = hashlib.sha256()
    for quote in itertools.islice(market.quotes(lambda: next(ticks)), 20_000):
        digest.update(quote.instrument.encode() + b"\0" + encode_quote(quote) + b"\n")
    assert digest.hexdigest() == PINNED_FEED_DIGEST


#: sha256 of the stream above, computed on the feed as it was before the change.
PINNED_FEED_DIGEST = "44bd1b40e2804f853b423f526575d83910dce8e9e4858f66d55cd9492fd6fed4"
