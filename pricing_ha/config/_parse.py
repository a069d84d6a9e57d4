"""Typed conversion of TOML tables and environment overrides into frozen dataclasses.

This is the generic half of configuration loading: it knows nothing about pricing-ha's sections,
only how to turn a parsed TOML document (plus ``PREFIX__SECTION__KEY=value`` environment
overrides) into a tree of frozen dataclasses, driven by the dataclasses' type hints. Every
problem is reported as a :class:`~pricing_ha.errors.ConfigError` naming where the value came
from (the file, or the environment variable), the dotted key and what is wrong.

Supported field types: ``bool``, ``int``, ``float``, ``str``, ``Decimal``, ``Path``,
``tuple[str, ...]``, ``X | None``, nested dataclasses and ``Mapping[str, X]`` (X a dataclass or
``str``). Environment values are text and are parsed according to the target field's type.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeVar

import orjson

from pricing_ha.errors import ConfigError

__all__ = ["EnvText", "apply_env", "convert_table", "set_env_value"]

T = TypeVar("T")

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_SCALAR_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


@dataclasses.dataclass(frozen=True, slots=True)
class EnvText:
    """A value taken from an environment variable, still unparsed.

    Attributes:
        text: the variable's value.
        var: the variable's name, used to name the source in errors.
    """

    text: str
    var: str

    @property
    def source(self) -> str:
        """The source string used in :class:`ConfigError`."""
        return f"environment variable {self.var}"


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    """Returns ``(X, True)`` for ``X | None``, else ``(tp, False)``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _is_mapping(tp: Any) -> bool:
    return typing.get_origin(tp) is Mapping


def _describe(value: object) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"{type(value).__name__} {value!r}"


def convert_table(cls: type[T], table: object, *, key: str, source: str) -> T:
    """Builds dataclass ``cls`` from a TOML table, recursing into nested tables.

    Args:
        cls: a dataclass whose fields all have defaults.
        table: the parsed table (``dict``), possibly holding :class:`EnvText` leaves.
        key: the dotted key of this table (``""`` for the document root).
        source: the file the table came from, named in errors.

    Returns:
        The constructed (and, through its ``__post_init__``, validated) instance.

    Raises:
        ConfigError: on unknown keys, wrong types or failed validation.
    """
    if not isinstance(table, dict):
        where = table.source if isinstance(table, EnvText) else source
        raise ConfigError(where, key or "(document)", f"expected a table, got {_describe(table)}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(table) - set(names))
    for name in unknown:
        removed = _removed(cls, name)
        if removed is not None:
            raise ConfigError(_source_of(table, name, source), _join(key, name), removed)
    if unknown:
        raise ConfigError(
            source, _join(key, unknown[0]), f"unknown key (known keys: {', '.join(names)})"
        )
    kwargs = {
        name: _convert(value, hints[name], _join(key, name), source)
        for name, value in table.items()
    }
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        # Validation in __post_init__ names keys relative to its own table; re-anchor the error
        # at the full dotted key and at the place the offending value came from.
        raise ConfigError(
            _source_of(table, exc.key, source), _join(key, exc.key), exc.problem
        ) from exc


def _removed(cls: type, name: str) -> str | None:
    """Why key ``name`` of ``cls`` is refused, if it is one the dataclass lists as removed (its
    ``REMOVED_KEYS``: name -> what to do instead): an old file setting it gets that problem,
    not a bare "unknown key"."""
    removed: Mapping[str, str] = getattr(cls, "REMOVED_KEYS", {})
    return removed.get(name)


def _source_of(table: Mapping[str, object], key: str, source: str) -> str:
    """Names where the value at dotted ``key`` below ``table`` came from."""
    node: object = table
    for name in key.split("."):
        if not isinstance(node, Mapping) or name not in node:
            break
        node = node[name]
    return node.source if isinstance(node, EnvText) else source


def _convert(value: object, tp: Any, key: str, source: str) -> object:
    tp, optional = _strip_optional(tp)
    if isinstance(value, EnvText):
        if optional and value.text == "":
            return None
        return _convert_env(value, tp, key)
    if dataclasses.is_dataclass(tp):
        return convert_table(tp, value, key=key, source=source)  # type: ignore[arg-type]
    if _is_mapping(tp):
        return _convert_mapping(value, tp, key, source)
    if typing.get_origin(tp) is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(source, key, f"expected an array of strings, got {_describe(value)}")
        return tuple(value)
    return _convert_scalar(value, tp, key, source)


def _convert_mapping(value: object, tp: Any, key: str, source: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise ConfigError(source, key, f"expected a table, got {_describe(value)}")
    value_tp = typing.get_args(tp)[1]
    out: dict[str, object] = {}
    for name, item in value.items():
        item_key = _join(key, name)
        if value_tp is str and not isinstance(item, EnvText):
            out[name] = _setting_text(item, item_key, source)
        else:
            out[name] = _convert(item, value_tp, item_key, source)
    return types.MappingProxyType(out)


def _setting_text(item: object, key: str, source: str) -> str:
    # Pass-through settings (librdkafka) are text, but TOML users naturally write numbers and
    # booleans; accept any scalar and pass it on in librdkafka's spelling.
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float | str):
        return str(item)
    raise ConfigError(source, key, f"expected a scalar, got {_describe(item)}")


def _convert_scalar(value: object, tp: Any, key: str, source: str) -> object:
    if tp is bool and isinstance(value, bool):
        return value
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ConfigError(source, key, f"must be a finite number, got {value!r}")
        return float(value)
    if tp is str and isinstance(value, str):
        return value
    if tp is Path and isinstance(value, str):
        return Path(value)
    if tp is Decimal and isinstance(value, int | float | str) and not isinstance(value, bool):
        # repr() of a float is its shortest round-trip decimal form: 0.0001 stays 0.0001.
        return _parse_decimal(repr(value) if isinstance(value, float) else str(value), key, source)
    expected = _SCALAR_NAMES.get(tp) or ("a path" if tp is Path else "a decimal number")
    raise ConfigError(source, key, f"expected {expected}, got {_describe(value)}")


def _parse_decimal(text: str, key: str, source: str) -> Decimal:
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        raise ConfigError(source, key, f"expected a decimal number, got {text!r}") from None
    if not number.is_finite():
        raise ConfigError(source, key, f"must be a finite number, got {text!r}")
    return number


def _convert_env(value: EnvText, tp: Any, key: str) -> object:
    text, source = value.text.strip(), value.source
    if tp is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(source, key, f"expected a boolean (true/false), got {value.text!r}")
    if tp is int or tp is float:
        try:
            number: object = tp(text)
        except ValueError:
            raise ConfigError(
                source, key, f"expected {_SCALAR_NAMES[tp]}, got {value.text!r}"
            ) from None
        return _convert_scalar(number, tp, key, source)
    if tp is Decimal:
        return _parse_decimal(text, key, source)
    if tp is str:
        return value.text
    if tp is Path:
        return Path(value.text)
    if typing.get_origin(tp) is tuple:
        if text.startswith("["):
            try:
                items = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise ConfigError(source, key, f"invalid JSON array: {exc}") from exc
            return _convert(items, tp, key, source)
        return tuple(part.strip() for part in text.split(",") if part.strip())
    raise ConfigError(source, key, "cannot be set from the environment; set its keys one by one")


def set_env_value(raw: dict[str, object], path: list[str], value: EnvText) -> None:
    """Stores ``value`` at ``path`` in a raw TOML tree, creating intermediate tables.

    Raises:
        ConfigError: if a non-table value is in the way.
    """
    node = raw
    for depth, name in enumerate(path[:-1]):
        child = node.setdefault(name, {})
        if not isinstance(child, dict):
            raise ConfigError(
                value.source, ".".join(path[: depth + 1]), "is not a table in the config file"
            )
        node = child
    node[path[-1]] = value


def apply_env(raw: dict[str, object], cls: type, env: Mapping[str, str], *, prefix: str) -> None:
    """Inserts every ``{prefix}SECTION__KEY=value`` variable of ``env`` into ``raw``.

    Section and key names are case-insensitive. Below a ``Mapping[str, str]`` (pass-through
    settings) the segment is lower-cased with ``_`` read as ``.``, so
    ``..._LIBRDKAFKA__SSL_CA_LOCATION`` sets ``ssl.ca.location``; below a mapping of tables
    (per-instrument overrides) the segment is kept verbatim, since symbols are case-sensitive.

    Raises:
        ConfigError: naming the variable, for unknown or malformed names.
    """
    for var in sorted(env):
        if var.upper().startswith(prefix):
            value = EnvText(env[var], var)
            path = _env_path(var[len(prefix) :].split("__"), cls, value)
            set_env_value(raw, path, value)


def _env_path(parts: list[str], tp: Any, value: EnvText) -> list[str]:
    path: list[str] = []
    while True:
        key = ".".join(path) or "(none)"
        if not parts or not parts[0]:
            raise ConfigError(value.source, key, "malformed name: expected PREFIX__SECTION__KEY")
        segment, parts = parts[0], parts[1:]
        if dataclasses.is_dataclass(tp):
            name = segment.lower()
            hints = typing.get_type_hints(tp)
            if name not in hints or name not in {f.name for f in dataclasses.fields(tp)}:
                problem = _removed(tp, name) or "unknown key"  # type: ignore[arg-type]
                raise ConfigError(value.source, _join(".".join(path), name), problem)
            tp = _strip_optional(hints[name])[0]
        elif _is_mapping(tp):
            tp = typing.get_args(tp)[1]
            name = segment.lower().replace("_", ".") if tp is str else segment
        else:
            raise ConfigError(value.source, key, f"{key} is not a table")
        path.append(name)
        if not parts:
            if dataclasses.is_dataclass(tp) or _is_mapping(tp):
                raise ConfigError(
                    value.source, ".".join(path), "is a table; set its keys one by one"
                )
            return path
