"""Kafka record headers, normalised; and the one rule that tells a control record on ``prices``.

A relay writes *control records* beside the prices on ``prices`` (takeover and release markers,
checkpoints, hand-over notices: :mod:`pricing_ha.dedupe.control`). The rule, the same for every
reader (the relay's standby, subscribers, the Spark pipeline, local tools): **a record is a
control record if and only if it has no key and carries** :data:`CONTROL_HEADER`
(:func:`is_control`). A price always has a key (its instrument: a raw price without one is
dead-lettered), and the relay writes only allow-listed headers on the prices it relays
(:mod:`pricing_ha.dedupe.relayed`), so a record a publisher wrote, whatever headers it carries,
is never taken for a control record, and a control header forged on one never reaches
``prices``.
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


def header_pairs(headers: Headers) -> Iterable[tuple[str, HeaderValue]]:
    """Headers as an iterable of pairs, without copying a list (hot paths)."""
    if type(headers) is list:  # what confluent-kafka hands out; no ABC check (per record)
        return headers
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


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


def is_control(key: str | bytes | None, headers: Headers) -> bool:
    """Whether a record with this key and these headers is a control record, not a price:
    no key, and :data:`CONTROL_HEADER` among its headers (see the module docstring)."""
    return key is None and any(k == CONTROL_HEADER for k, _ in header_list(headers))
