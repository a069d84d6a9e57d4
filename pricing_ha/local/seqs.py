"""A price record's seq and epoch, as the local tools read them: from the value, never from a
header."""

from __future__ import annotations

import orjson

__all__ = ["value_epoch", "value_seq"]


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


def value_epoch(value: bytes | None) -> int:
    """The epoch in a price record's value (0 when it has none or is not a price's value): a
    restarted feed numbers from seq 1 again in a later epoch, so seqs order as ``(epoch, seq)``.
    """
    try:
        doc = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return 0
    epoch = doc.get("epoch") if isinstance(doc, dict) else None
    return epoch if type(epoch) is int and epoch >= 0 else 0
