"""How the demo's live view looks: rich tables, redrawn in place on a terminal, printed to a log.

:class:`ViewState` is what :class:`~pricing_ha.local.demo_view.LiveView` saw at one instant;
:func:`view_renderable` draws it (who leads each partition in every group, then the
instruments on ``prices``, stalest first); :func:`demo_screen` shows it while the demo runs.
On a terminal that is a ``rich`` live display (:class:`~pricing_ha.screen.LiveScreen`): the
view stays at the bottom, redrawn in place, and the demo's notes (printed as they happen)
scroll above it. Otherwise (a pipe, a file, CI) the view is printed as plain text every few
seconds, between the notes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from pricing_ha.screen import LiveScreen

__all__ = ["InstrumentLine", "ViewState", "demo_screen", "view_renderable", "view_text"]

_TEXT_WIDTH = 110  # the plain view's width: the leadership of 8 partitions fits in it


@dataclass(frozen=True)
class InstrumentLine:
    """One instrument on ``prices``: its latest seq, how long ago it arrived, its defects."""

    name: str
    last_seq: int
    stale_s: float | None  # None: nothing arrived yet
    duplicates: int = 0
    gaps: int = 0
    relay: str = ""


@dataclass(frozen=True)
class ViewState:
    """What the live view shows at one instant.

    Attributes:
        elapsed_s: seconds on the demo's clock.
        leaders: per group label (``P1/a``), partition -> members that report leading it.
        relayed: records read from ``prices``.
        lines: one per instrument seen on ``prices``.
    """

    elapsed_s: float
    leaders: dict[str, dict[int, list[str]]]
    relayed: int
    lines: Sequence[InstrumentLine]

    @property
    def duplicates(self) -> int:
        """Duplicates seen on ``prices`` (a defect)."""
        return sum(ln.duplicates for ln in self.lines)

    @property
    def gaps(self) -> int:
        """Seqs missing on ``prices``."""
        return sum(ln.gaps for ln in self.lines)


def _leaders_table(state: ViewState) -> Table:
    partitions = sorted({p for by in state.leaders.values() for p in by})
    table = Table(title="who leads each partition", title_justify="left", expand=False)
    table.add_column("group")
    for p in partitions:
        table.add_column(f"p{p}", justify="center")
    for label, by in state.leaders.items():
        cells: list[Text] = []
        for p in partitions:
            members = sorted(by.get(p, []))
            # No leader is an outage of that slice; two are a non-exclusive hand-over.
            colour = "bold red" if not members else ("yellow" if len(members) > 1 else "green")
            cells.append(Text("+".join(members) or "-", style=colour))
        table.add_row(label, *cells)
    return table


def _instruments_table(state: ViewState, max_rows: int) -> Table:
    table = Table(title="prices, stalest first", title_justify="left")
    for name, justify in (
        ("instrument", "left"),
        ("last seq", "right"),
        ("stale s", "right"),
        ("dups", "right"),
        ("gaps", "right"),
        ("relay", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    by_staleness = sorted(
        state.lines, key=lambda ln: (-(math.inf if ln.stale_s is None else ln.stale_s), ln.name)
    )
    for ln in by_staleness[:max_rows]:
        stale = "-" if ln.stale_s is None else f"{ln.stale_s:.1f}"
        table.add_row(
            ln.name,
            str(ln.last_seq),
            stale,
            Text(str(ln.duplicates), style="bold red" if ln.duplicates else ""),
            Text(str(ln.gaps), style="bold red" if ln.gaps else ""),
            ln.relay,
        )
    if len(state.lines) > max_rows:
        table.caption = f"... and {len(state.lines) - max_rows} more"
    return table


def view_renderable(state: ViewState, max_rows: int = 12) -> RenderableType:
    """The view: a headline, the leadership table, the instruments (at most ``max_rows``,
    stalest first)."""
    headline = Text.assemble(
        ("pricing-ha demo", "bold"),
        f"  t = {state.elapsed_s:5.1f} s   prices: {state.relayed} records, "
        f"{len(state.lines)} instruments, ",
        (f"duplicates {state.duplicates}", "bold red" if state.duplicates else ""),
        ", ",
        (f"gaps {state.gaps}", "bold red" if state.gaps else ""),
    )
    parts: list[RenderableType] = [headline, _leaders_table(state)]
    if state.lines:
        parts.append(_instruments_table(state, max_rows))
    return Group(*parts)


def view_text(state: ViewState, width: int = _TEXT_WIDTH) -> str:
    """The view as plain text (no colour, no control codes), for a log."""
    console = Console(file=io.StringIO(), width=width, color_system=None, record=True)
    console.print(view_renderable(state))
    return "\n".join(line.rstrip() for line in console.export_text().rstrip().splitlines())


def demo_screen(
    state: Callable[[], ViewState], out: Callable[[str], None], *, live: bool = True
) -> LiveScreen:
    """The demo's live view (a context manager; ``tick()`` it in the demo's loop): redrawn
    twice a second on a terminal, printed every 5 s to a log."""
    return LiveScreen(
        lambda: view_renderable(state()),
        lambda: view_text(state()),
        out,
        enabled=live,
        terminal_every_s=0.5,
        plain_every_s=5.0,
    )
