"""A live view for a terminal that still makes a readable log: ``rich`` when stdout is a terminal.

:class:`LiveScreen` shows something that changes while a command runs (the demo's leadership
and prices, ``pricing-ha subscribe``'s table). On a terminal it is a ``rich`` live display: the
view stays at the bottom of the screen, redrawn in place, and whatever else the command prints
scrolls above it (no clearing of the screen, so nothing printed is lost). Otherwise (a pipe, a
file, CI) the plain text of the view is printed every so often, between the other lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console, RenderableType
from rich.live import Live

__all__ = ["LiveScreen"]


class LiveScreen:
    """Shows a view while a command runs (see the module docstring); a context manager.

    Args:
        renderable: the view now, for a terminal.
        plain: the view now as plain text, for a log.
        out: prints one piece of text (the log path).
        enabled: whether to show the view at all.
        terminal_every_s: how often the view is redrawn on a terminal.
        plain_every_s: how often it is printed to a log.
        console: where a terminal's live display goes (default: standard output); the plain
            path is taken when it is not a terminal.
    """

    def __init__(
        self,
        renderable: Callable[[], RenderableType],
        plain: Callable[[], str],
        out: Callable[[str], object],
        *,
        enabled: bool = True,
        terminal_every_s: float = 0.5,
        plain_every_s: float = 5.0,
        console: Console | None = None,
    ) -> None:
        self._renderable, self._plain, self._out = renderable, plain, out
        self._enabled = enabled
        self._every_s = (terminal_every_s, plain_every_s)
        self._console = console or Console()
        self._live: Live | None = None
        self._next = 0.0

    @property
    def on_terminal(self) -> bool:
        """Whether the view is redrawn in place (a terminal) rather than printed."""
        return self._enabled and self._console.is_terminal

    def __enter__(self) -> LiveScreen:
        if self.on_terminal:
            self._live = Live(
                console=self._console,
                auto_refresh=False,  # redrawn by tick(): no thread of its own
                transient=False,  # the last frame stays on the screen
                redirect_stdout=True,  # other output prints above the view
                redirect_stderr=True,
            )
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            if exc_type is None:
                self._live.update(self._renderable(), refresh=True)  # the final state
            self._live.stop()
            self._live = None

    def skip(self, seconds: float) -> None:
        """Show nothing for the next ``seconds`` (e.g. until there is something to show)."""
        self._next = time.monotonic() + seconds

    def tick(self) -> None:
        """Redraw (a terminal) or print (a log) the view, if it is time to."""
        if not self._enabled or time.monotonic() < self._next:
            return
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)
            self._next = time.monotonic() + self._every_s[0]
        else:
            self._out(self._plain())
            self._next = time.monotonic() + self._every_s[1]
