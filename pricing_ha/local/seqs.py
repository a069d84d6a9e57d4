"""A price record's seq, as the local tools read it: from the value, never from a header."""

from __future__ import annotations

import orjson

__all__ = ["value_seq"]


def value_seq(key: bytes | str | None, value: bytes | None) -> int | None:
    """The seq in a price record's value (``None``: no key, or not a price's value).

    A publisher chooses its headers, so a ``seq`` header proves nothing; the value is what
    the relay arbitrated on and what subscribers read.
    """
    if key is None or not value:
        return None
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    seq = doc.get("seq") if isinstance(doc, dict) else None
    return seq if type(seq) is int and seq >= 1 else None
