"""Strict reading of flat JSON objects, shared by the quote and price wire formats.

Both formats are small JSON objects whose fields must have exact JSON types; this module holds
the type checks once. Errors are :class:`WireFormatError` (a ``ValueError``), which the public
modules translate into their own error classes.
"""

from __future__ import annotations

import math

import orjson

__all__ = ["WireFormatError", "get_float", "get_int", "get_str", "load_object"]


class WireFormatError(ValueError):
    """A JSON message does not have the expected shape."""


def load_object(value: bytes) -> dict[str, object]:
    """Parses ``value`` as a JSON object.

    Raises:
        WireFormatError: if it is not valid JSON or not an object.
    """
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise WireFormatError(f"not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise WireFormatError(f"not a JSON object: {type(obj).__name__}")
    return obj


def _get(obj: dict[str, object], name: str) -> object:
    if name not in obj:
        raise WireFormatError(f"missing field {name!r}")
    return obj[name]


def get_str(obj: dict[str, object], name: str) -> str:
    """Returns string field ``name``."""
    value = _get(obj, name)
    if not isinstance(value, str):
        raise WireFormatError(f"field {name!r} must be a string, got {value!r}")
    return value


def get_int(obj: dict[str, object], name: str) -> int:
    """Returns integer field ``name`` (JSON ``true`` is not an integer)."""
    value = _get(obj, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireFormatError(f"field {name!r} must be an integer, got {value!r}")
    return value


def get_float(obj: dict[str, object], name: str) -> float:
    """Returns finite number field ``name`` as a float (integers are accepted)."""
    value = _get(obj, name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireFormatError(f"field {name!r} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise WireFormatError(f"field {name!r} is not finite: {value!r}")
    return number
