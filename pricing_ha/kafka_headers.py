"""Kafka record headers as text."""

from __future__ import annotations

from collections.abc import Iterable


def header_dict(headers: Iterable[tuple[str, bytes | str | None]] | None) -> dict[str, str]:
    """Headers as a dict of text (the last value of a repeated header wins)."""
    out: dict[str, str] = {}
    for k, v in headers or ():
        out[k] = v.decode() if isinstance(v, bytes) else (v or "")
    return out
