"""How ``pricing-ha subscribe``'s live table looks on a terminal (``rich``).

One row per instrument (at most ``max_rows``, the stalest first: the instruments an operator
looks for), defects in red, and the totals with the latency percentiles under the table. A log
(stdout not a terminal) gets :meth:`~pricing_ha.subscribing.stats.SubscriberStats.render`, the
plain table, instead: see :class:`~pricing_ha.screen.LiveScreen`.
"""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pricing_ha.subscribing.stats import InstrumentStats, SubscriberStats, percentiles

__all__ = ["subscriber_table"]


def _red_if(n: int) -> Text:
    return Text(str(n), style="bold red" if n else "")


def subscriber_table(stats: SubscriberStats, now: float, max_rows: int = 40) -> RenderableType:
    """The live table of ``stats`` at monotonic time ``now``."""
    mode = "direct: A/B arbitration of the raw topic" if stats.direct else "relay output"
    table = Table(title=f"{stats.topic} ({mode})", title_justify="left")
    for name in (
        "instrument",
        "last seq",
        "delivered",
        "gaps",
        "dups",
        "stale s",
        "max silence ms",
    ):
        table.add_column(name, justify="left" if name == "instrument" else "right")

    def stale(s: InstrumentStats) -> float:
        return now - s.last_received if s.last_received is not None else math.inf

    rows = sorted(stats.instruments.items(), key=lambda kv: (-stale(kv[1]), kv[0]))
    bound = stats.max_silence_bound_s
    for name, s in rows[:max_rows]:
        age = stale(s)
        over = bound is not None and s.max_silence_s > bound
        table.add_row(
            name,
            str(s.last_seq or 0),
            str(s.delivered),
            _red_if(s.gaps),
            _red_if(s.duplicates),
            "-" if math.isinf(age) else f"{age:.2f}",
            Text(f"{s.max_silence_s * 1000:.0f}", style="bold red" if over else ""),
        )
    if len(rows) > max_rows:
        table.caption = f"... and {len(rows) - max_rows} more"
    lat = percentiles(list(stats.publish_latency_s))
    totals = Text.assemble(
        f"{stats.total('delivered')} delivered, ",
        (f"{stats.total('gaps')} gaps", "bold red" if stats.total("gaps") else "green"),
        ", ",
        (
            f"{stats.total('duplicates')} duplicates",
            "bold red" if stats.total("duplicates") else "green",
        ),
        f", {stats.total('copies_dropped')} copies dropped, {stats.invalid} invalid; "
        f"latency p50 {lat.get('p50_ms', 0):.1f} ms, p99 {lat.get('p99_ms', 0):.1f} ms",
    )
    return Group(table, totals)
