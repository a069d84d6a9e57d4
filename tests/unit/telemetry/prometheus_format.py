"""A strict reader of the Prometheus text exposition format 0.0.4, for tests of ``/metrics``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_VALUE = r"(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]Inf|NaN)"
_SAMPLE = re.compile(
    rf"^(?P<name>{_NAME})(?:\{{(?P<labels>{_LABEL}(?:,{_LABEL})*)?\}})? (?P<value>{_VALUE})"
    rf"(?: -?\d+)?$"
)
_HELP = re.compile(rf"^# HELP (?P<name>{_NAME}) (?P<text>.*)$")
_TYPE = re.compile(rf"^# TYPE (?P<name>{_NAME}) (?P<kind>counter|gauge|histogram|summary|untyped)$")
_LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


@dataclass
class Family:
    """One metric family: its type and samples as ``(name, labels, value)``."""

    kind: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)


def parse(text: str) -> dict[str, Family]:
    """Parse exposition text, raising AssertionError on anything the format does not allow."""
    assert text == "" or text.endswith("\n"), "exposition must end with a newline"
    families: dict[str, Family] = {}
    current: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if m := _TYPE.match(line):
            name = m["name"]
            assert name not in families, f"line {number}: second TYPE for {name}"
            families[name] = Family(m["kind"])
            current = name
        elif _HELP.match(line) or not line.strip():
            continue
        elif line.startswith("#"):
            raise AssertionError(f"line {number}: malformed comment {line!r}")
        else:
            m = _SAMPLE.match(line)
            assert m is not None, f"line {number}: malformed sample {line!r}"
            assert current is not None, f"line {number}: sample before any TYPE"
            fam = families[current]
            allowed = {current} | {current + s for s in _SUFFIXES.get(fam.kind, ())}
            assert m["name"] in allowed, f"line {number}: {m['name']} outside family {current}"
            labels = {k: _unescape(v) for k, v in _LABEL_PAIR.findall(m["labels"] or "")}
            fam.samples.append((m["name"], labels, float(m["value"])))
    return families


def value(families: dict[str, Family], name: str, **labels: str) -> float:
    """The value of the one sample called ``name`` whose labels include ``labels``."""
    found = [
        v
        for fam in families.values()
        for n, lab, v in fam.samples
        if n == name and labels.items() <= lab.items()
    ]
    assert len(found) == 1, f"{len(found)} samples {name}{labels}"
    return found[0]
