"""Kafka record headers, normalised; and the control-record marker of ``prices``.

A record of ``prices`` whose headers carry :data:`CONTROL_HEADER` is not a price: it is written
by a relay taking over a partition to learn, by reading it back, where the partition ends (see
:mod:`pricing_ha.dedupe.relay`). It has no key and an empty value. Every reader of ``prices``
skips it (:func:`is_control`); so must any other consumer of that topic.
"""

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
    """Headers as a dict of text (the last value of a repeated header wins).

    Total: bytes that are not UTF-8 become U+FFFD (a reader that must refuse them decodes the
    header itself, with :func:`header_text`).
    """
    out: dict[str, str] = {}
    for k, v in header_list(headers):
        out[k] = v.decode(errors="replace") if isinstance(v, bytes) else (v or "")
    return out


#: Most digits :func:`header_int` accepts: an int64 (Kafka's and Spark's long) has 19.
MAX_DECIMAL_DIGITS = 19


def header_text(value: HeaderValue) -> str | None:
    """A header value as text, or ``None`` if its bytes are not UTF-8 (``None`` as empty)."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return None
    return value or ""


def header_int(value: HeaderValue) -> int | None:
    """A header value that is a non-negative decimal integer (ASCII digits only, at most
    :data:`MAX_DECIMAL_DIGITS` of them), or ``None``.

    ``str.isdigit`` is not that test: it accepts digits ``int`` refuses ("²") and strings too
    long for ``int`` to convert; one such header must not raise out of a consuming loop.
    """
    raw = value.encode(errors="replace") if isinstance(value, str) else (value or b"")
    if not 0 < len(raw) <= MAX_DECIMAL_DIGITS or not raw.isdigit():  # bytes: ASCII digits only
        return None
    return int(raw)


#: The header that marks a control record on ``prices`` (its value says which kind).
CONTROL_HEADER = "pricing-ha-control"


def is_control(headers: Headers) -> bool:
    """Whether a record with these headers is a control record, not a price."""
    return any(k == CONTROL_HEADER for k, _ in header_list(headers))
