"""Charts for the HTML pages (the pipeline report, the leadership timeline): matplotlib to SVG.

Figures are built with matplotlib's object API on an Agg canvas (no pyplot: no global state, no
GUI backend, safe in any thread) and saved as SVG with text kept as text, so a page inlines
them and opens anywhere, offline. :func:`svg` then makes the SVG fit for inlining in HTML:
no XML prolog, no DOCTYPE, no RDF metadata (their URLs are identifiers, but a page that names
no URL at all is easier to check), ids prefixed per figure, and the annotations a page wants
on individual artists: a ``<title>`` (the browser's tooltip on hover), a CSS class and
``data-*`` attributes. An artist is annotated by giving it a gid (``artist.set_gid``) and an
:class:`Note` under that gid.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import matplotlib as mpl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.typing import RcKeyType

__all__ = ["PALETTE", "Note", "figure", "style", "svg"]

#: Tableau 10: distinguishable, also for the commonest colour blindness.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
_SVG_NS = "http://www.w3.org/2000/svg"
_XLINK_NS = "http://www.w3.org/1999/xlink"
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text stays text: searchable, selectable, small
    "font.size": 9.0,
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10.0,
}


@dataclass(frozen=True)
class Note:
    """What to add to the SVG element of one artist (found by its gid).

    Attributes:
        title: the tooltip (an SVG ``<title>`` child); empty for none.
        css_class: a ``class`` attribute; empty for none.
        data: ``data-*`` attributes (keys without the ``data-`` prefix).
    """

    title: str = ""
    css_class: str = ""
    data: Mapping[str, str] = field(default_factory=dict)


@contextmanager
def style() -> Iterator[None]:
    """The pages' style: build a figure and call :func:`svg` inside it (matplotlib reads its
    settings when an artist is made, and when the figure is saved)."""
    with mpl.rc_context(_RC):
        yield


def figure(width_in: float, height_in: float) -> Figure:
    """A new figure on an Agg canvas (call it inside :func:`style`)."""
    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def svg(fig: Figure, prefix: str, notes: Mapping[str, Note] | None = None) -> str:
    """``fig`` as an ``<svg>`` element to inline in HTML (see the module docstring).

    Args:
        fig: the figure (from :func:`figure`).
        prefix: makes the SVG's ids unique in a page holding several figures.
        notes: per artist gid, what to add to its element.

    Returns:
        The ``<svg>`` element as text.
    """
    buf = io.StringIO()
    with mpl.rc_context({**_RC, "svg.hashsalt": prefix}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    ET.register_namespace("", _SVG_NS)
    ET.register_namespace("xlink", _XLINK_NS)
    root = ET.fromstring(buf.getvalue())  # noqa: S314 - matplotlib's own output, not input
    for meta in root.findall(f"{{{_SVG_NS}}}metadata"):
        root.remove(meta)
    _prefix_ids(root, prefix)
    for element in root.iter():
        note = (notes or {}).get(element.get("id", "").removeprefix(f"{prefix}-"))
        if note is None:
            continue
        if note.css_class:
            element.set("class", note.css_class)
        for key, value in note.data.items():
            element.set(f"data-{key}", value)
        if note.title:
            title = ET.Element(f"{{{_SVG_NS}}}title")
            title.text = note.title
            element.insert(0, title)
    root.set("role", "img")
    return ET.tostring(root, encoding="unicode")


_REF = re.compile(r"url\(#([^)]+)\)")


def _prefix_ids(root: ET.Element, prefix: str) -> None:
    """Prefix every id (and every reference to one) with ``prefix``, so that two figures of a
    page never share an id; an annotated gid keeps its name after the prefix."""
    href = f"{{{_XLINK_NS}}}href"
    for e in root.iter():
        old = e.get("id")
        if old:
            e.set("id", f"{prefix}-{old}")
        for attr in ("clip-path", "style", "fill", "mask"):
            value = e.get(attr)
            if value and "url(#" in value:
                e.set(attr, _REF.sub(lambda m: f"url(#{prefix}-{m[1]})", value))
        link = e.get(href)
        if link and link.startswith("#"):
            e.set(href, f"#{prefix}-{link[1:]}")
