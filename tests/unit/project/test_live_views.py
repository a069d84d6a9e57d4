"""The live views (demo, `pricing-ha subscribe`): rich tables on fixed inputs, both outputs."""

from __future__ import annotations

import io
import re

from rich.console import Console

from pricing_ha.cli.subscribe_view import subscriber_table
from pricing_ha.local.demo_screen import InstrumentLine, ViewState, view_renderable, view_text
from pricing_ha.screen import LiveScreen
from pricing_ha.subscribing.stats import SubscriberStats


def _text(renderable: object, width: int = 120) -> str:
    """What ``renderable`` prints on a plain console of ``width`` columns."""
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def _row(text: str, first: str) -> list[str]:
    """The cells of the table row starting with ``first``."""
    (line,) = [ln for ln in text.splitlines() if re.match(rf"[│|]\s*{re.escape(first)}\s", ln)]
    return [c.strip() for c in re.split(r"[│|]", line)[1:-1]]


STATE = ViewState(
    elapsed_s=12.34,
    leaders={
        "P1/a": {0: ["a"], 1: [], 2: ["b", "a"]},
        "relay": {0: ["r1"], 1: ["r2"], 2: ["r2"]},
    },
    relayed=345,
    lines=[
        InstrumentLine("AAPL", 120, 0.1, relay="r1"),
        InstrumentLine("EURUSD", 98, 2.5, duplicates=1, gaps=2, relay="r2"),
        InstrumentLine("GBPUSD", 110, 0.4, relay="r2"),
    ],
)


def test_demo_view_shows_leaders_per_partition_and_the_stalest_instrument_first() -> None:
    """Each group's row has a cell per partition (a missing leader is '-'), instruments run
    stalest first with their defects, and the headline has the totals."""
    text = _text(view_renderable(STATE))
    assert "t =  12.3 s   prices: 345 records, 3 instruments, duplicates 1, gaps 2" in text
    assert _row(text, "P1/a") == ["P1/a", "a", "-", "a+b"]
    assert _row(text, "relay") == ["relay", "r1", "r2", "r2"]
    rows = {name: text.index(f"│ {name}") for name in ("AAPL", "EURUSD", "GBPUSD")}
    assert rows["EURUSD"] < rows["GBPUSD"] < rows["AAPL"]
    assert _row(text, "EURUSD") == ["EURUSD", "98", "2.5", "1", "2", "r2"]


def test_demo_view_caps_the_instruments_and_says_how_many_more() -> None:
    """Beyond max_rows instruments the stalest are kept and the rest counted."""
    lines = [InstrumentLine(f"I{k:02d}", k, float(k)) for k in range(20)]
    text = _text(view_renderable(ViewState(1.0, {}, 20, lines), max_rows=5))
    assert "... and 15 more" in text
    assert "I19" in text
    assert "I14" not in text


def test_demo_view_as_log_text_has_no_control_codes() -> None:
    """The plain view (a log) carries the tables but no escape codes (no clear-screen)."""
    text = view_text(STATE)
    assert "\x1b" not in text
    assert _row(text, "P1/a")[2] == "-"


def _stats() -> SubscriberStats:
    """Two instruments: one delivered recently, one with a gap and a long silence."""
    stats = SubscriberStats(direct=False, topic="prices", max_silence_bound_s=1.0)
    a = stats.instrument("AAPL")
    for seq, t in ((1, 100.0), (2, 100.5), (3, 109.0)):
        a.on_delivered(seq, t)
    e = stats.instrument("EURUSD")
    for seq, t in ((1, 100.0), (4, 100.2)):
        e.on_delivered(seq, t)
    stats.publish_latency_s.extend([0.002, 0.004, 0.010])
    return stats


def test_subscriber_table_has_a_row_per_instrument_with_its_figures() -> None:
    """Last seq, delivered, gaps, duplicates, staleness and longest silence land in their
    columns; the stalest instrument comes first; the totals line has the percentiles."""
    text = _text(subscriber_table(_stats(), now=110.0))
    assert "prices (relay output)" in text
    assert _row(text, "AAPL") == ["AAPL", "3", "3", "0", "0", "1.00", "8500"]
    assert _row(text, "EURUSD") == ["EURUSD", "4", "2", "2", "0", "9.80", "200"]
    assert text.index("│ EURUSD") < text.index("│ AAPL")
    assert "5 delivered, 2 gaps, 0 duplicates, 0 copies dropped, 0 invalid" in text
    assert "latency p50 4.0 ms, p99 10.0 ms" in text


def test_live_screen_on_a_terminal_redraws_in_place_without_clearing_the_screen() -> None:
    """On a terminal the view is a rich live display (cursor moves, no clear-screen), and
    text printed meanwhile is kept above it; the final frame is the final state."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    seen = [0]

    def view() -> str:
        seen[0] += 1
        return f"frame {seen[0]}"

    screen = LiveScreen(view, lambda: "plain", out.write, console=console, terminal_every_s=0)
    assert screen.on_terminal
    with screen:
        screen.tick()
        console.print("a note")
        screen.tick()
    written = out.getvalue()
    assert "\x1b[2J" not in written  # never clears the screen
    assert "a note" in written
    assert "plain" not in written
    last = written.rstrip().removesuffix("\x1b[?25h").rstrip()  # the cursor shown again
    assert last.endswith(f"\x1b[2Kframe {seen[0]}")  # the final frame over the previous one


def test_live_screen_in_a_log_prints_the_plain_view_at_its_interval() -> None:
    """Not a terminal: the plain text is printed, once per interval, with no escape codes."""
    printed: list[str] = []
    console = Console(file=io.StringIO(), force_terminal=False)
    screen = LiveScreen(lambda: "rich", lambda: "plain view", printed.append, console=console)
    assert not screen.on_terminal
    with screen:
        screen.tick()
        screen.tick()  # within plain_every_s of the first: nothing
    assert printed == ["plain view"]
    off = LiveScreen(lambda: "rich", lambda: "plain", printed.append, enabled=False)
    with off:
        off.tick()
    assert printed == ["plain view"]
