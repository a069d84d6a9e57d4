"""Kafka record headers, normalised."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

HeaderValue = str | bytes | None
Headers = Mapping[str, HeaderValue] | Iterable[tuple[str, HeaderValue]] | None


def header_list(headers: Headers) -> list[tuple[str, HeaderValue]]:
    """Headers as a list of pairs (confluent-kafka may hand out a list or a dict)."""
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    return list(headers)


def header_dict(headers: Headers) -> dict[str, str]:
    """Headers as a dict of text (the last value of a repeated header wins)."""
    out: dict[str, str] = {}
    for k, v in header_list(headers):
        out[k] = v.decode() if isinstance(v, bytes) else (v or "")
    return out
