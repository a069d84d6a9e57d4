"""The JSON Schema files of the records, and the AsyncAPI document, generated from the structs.

``docs/schemas/<record>.json`` (one per record, :data:`RECORDS`) and ``docs/asyncapi.json``
(:mod:`pricing_ha.wire.asyncapi`) are generated, never edited by hand::

    python -m pricing_ha.wire.schemas --write    # regenerate docs/schemas and docs/asyncapi.json
    python -m pricing_ha.wire.schemas            # check: exit 1 and name each stale file

``tests/unit/wire/test_wire_schemas.py`` fails when the committed copies differ from what the code
generates, so a struct changed without regenerating does not land.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from pricing_ha.wire._headers import (
    ControlHeaders,
    DeadLetterHeaders,
    PriceHeaders,
    QuoteHeaders,
    RawPriceHeaders,
)
from pricing_ha.wire._values import Checkpoint, Heartbeat, Price, Quote
from pricing_ha.wire.asyncapi import SCHEMA_DIR, build_document

__all__ = [
    "ASYNCAPI_FILE",
    "DOCS_DIR",
    "RECORDS",
    "SCHEMA_DIR",
    "generated",
    "main",
    "record_schema",
    "stale",
]

#: Schema file name (without ``.json``) -> the struct it describes.
RECORDS: dict[str, type[msgspec.Struct]] = {
    "quote": Quote,
    "quote-headers": QuoteHeaders,
    "price": Price,
    "raw-price-headers": RawPriceHeaders,
    "price-headers": PriceHeaders,
    "control-headers": ControlHeaders,
    "checkpoint": Checkpoint,
    "dead-letter-headers": DeadLetterHeaders,
    "neli-heartbeat": Heartbeat,
}
#: The repository's docs/ (where an editable install finds it).
DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
ASYNCAPI_FILE = "asyncapi.json"
_REGENERATE = "python -m pricing_ha.wire.schemas --write"
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _tidy(node: Any) -> Any:
    """Docstring descriptions without their source indentation."""
    if isinstance(node, dict):
        return {
            k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _tidy(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    return node


def record_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema (2020-12) of one record: the struct's own schema at the top level."""
    generated_schema = msgspec.json.schema(struct)
    defs = dict(generated_schema["$defs"])
    root = defs.pop(struct.__name__)
    out: dict[str, Any] = {"$schema": _DIALECT, **root}
    if defs:
        out["$defs"] = defs
    tidy: dict[str, Any] = _tidy(out)
    return tidy


def _text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def generated() -> dict[str, str]:
    """Path under docs/ -> the text the code generates for it."""
    files = {f"{SCHEMA_DIR}/{name}.json": _text(record_schema(s)) for name, s in RECORDS.items()}
    files[ASYNCAPI_FILE] = _text(build_document())
    return files


def stale(docs: Path = DOCS_DIR) -> list[str]:
    """The generated files under ``docs`` that are missing or differ from what the code makes,
    and schema files there that no record generates."""
    files = generated()
    out = [
        name
        for name, text in files.items()
        if not (docs / name).is_file() or (docs / name).read_text() != text
    ]
    extra = sorted(
        f"{SCHEMA_DIR}/{p.name}"
        for p in (docs / SCHEMA_DIR).glob("*.json")
        if f"{SCHEMA_DIR}/{p.name}" not in files
    )
    return out + extra


def main(argv: Sequence[str] | None = None) -> int:
    """Check (default) or ``--write`` the generated files; 0 when they are up to date."""
    parser = argparse.ArgumentParser(prog="python -m pricing_ha.wire.schemas")
    parser.add_argument("--write", action="store_true", help="regenerate the files")
    parser.add_argument("--docs", type=Path, default=DOCS_DIR, help="the docs directory")
    args = parser.parse_args(argv)
    docs: Path = args.docs
    if args.write:
        (docs / SCHEMA_DIR).mkdir(parents=True, exist_ok=True)
        for name in stale(docs):
            if name not in generated():
                (docs / name).unlink()
        for name, text in generated().items():
            (docs / name).write_text(text)
        sys.stdout.write(f"wrote {len(generated())} files under {docs}\n")
        return 0
    out_of_date = stale(docs)
    for name in out_of_date:
        sys.stderr.write(f"{docs / name}: out of date; run {_REGENERATE}\n")
    return 1 if out_of_date else 0


if __name__ == "__main__":
    sys.exit(main())
