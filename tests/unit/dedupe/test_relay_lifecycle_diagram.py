"""docs/relay.md opens with the partition lifecycle's state diagram, and it is the code's."""

from __future__ import annotations

import re
from pathlib import Path

from pricing_ha.dedupe.lifecycle import INITIAL, TRANSITIONS, PartitionState

_DOC = Path(__file__).resolve().parents[3] / "docs" / "relay.md"
_EDGE = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)\s*(?::.*)?$")


def _diagram() -> list[str]:
    """The lines of the first mermaid block of docs/relay.md (which must be a state diagram)."""
    text = _DOC.read_text()
    block = re.search(r"```mermaid\n(.*?)```", text, re.DOTALL)
    assert block is not None, "docs/relay.md has no mermaid block"
    lines = block.group(1).splitlines()
    assert lines[0].strip() == "stateDiagram-v2"
    return lines[1:]


def _edges() -> set[tuple[str, str]]:
    return {(m[1], m[2]) for line in _diagram() if (m := _EDGE.match(line))}


def test_the_diagram_opens_the_document() -> None:
    """The state diagram comes before the document's first section."""
    text = _DOC.read_text()
    assert text.index("```mermaid") < text.index("\n## ")


def test_the_diagrams_transitions_are_exactly_the_codes() -> None:
    """Every arrow of the diagram is a legal transition and every legal transition is drawn."""
    drawn = {(a, b) for a, b in _edges() if a != "[*]" and b != "[*]"}
    code = {(a.name, b.name) for a, targets in TRANSITIONS.items() for b in targets}
    assert drawn == code


def test_the_diagram_starts_where_the_code_does() -> None:
    """The diagram's initial arrow points at the code's initial state, and names no other."""
    assert {(a, b) for a, b in _edges() if "[*]" in (a, b)} == {("[*]", INITIAL.name)}
    named = {name for edge in _edges() for name in edge} - {"[*]"}
    assert named == {s.name for s in PartitionState}
