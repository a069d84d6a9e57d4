"""The generated wire documents: docs/schemas/*.json and docs/asyncapi.json match the code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pricing_ha.config import TopicsConfig
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.wire import schemas
from pricing_ha.wire._values import Price

DOCS = schemas.DOCS_DIR
REGENERATE = "python -m pricing_ha.wire.schemas --write"


def test_the_committed_schemas_and_asyncapi_document_are_what_the_code_generates() -> None:
    """Every generated file is committed as generated: a struct changed without regenerating
    fails here."""
    assert schemas.stale() == [], f"out of date; run {REGENERATE}"


def test_a_struct_changed_without_regenerating_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A price struct with a new field no longer matches the committed price.json."""

    class Changed(Price, frozen=True, kw_only=True):
        venue: str = ""

    monkeypatch.setitem(schemas.RECORDS, "price", Changed)
    assert "schemas/price.json" in schemas.stale()
    assert schemas.main([]) == 1


def test_write_then_check_is_clean_and_drops_orphans(tmp_path: Path) -> None:
    """--write makes every file (and removes a schema no record generates); the check passes."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "gone.json").write_text("{}")
    assert schemas.main(["--docs", str(tmp_path)]) == 1
    assert schemas.main(["--write", "--docs", str(tmp_path)]) == 0
    assert not (tmp_path / "schemas" / "gone.json").exists()
    assert schemas.main(["--docs", str(tmp_path)]) == 0


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _pointer(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


@pytest.fixture(scope="module")
def asyncapi() -> dict[str, Any]:
    """The committed AsyncAPI document, parsed."""
    return dict(json.loads((DOCS / schemas.ASYNCAPI_FILE).read_text()))


def test_every_reference_of_the_asyncapi_document_resolves(asyncapi: dict[str, Any]) -> None:
    """Internal references point into the document, file references at committed schemas,
    and every schema file is referenced."""
    files = set()
    for ref in _refs(asyncapi):
        if ref.startswith("#/"):
            _pointer(asyncapi, ref)  # a KeyError names the broken reference
        else:
            assert (DOCS / ref).is_file(), ref
            files.add(ref)
    referenced = {f"{schemas.SCHEMA_DIR}/{p.name}" for p in (DOCS / "schemas").glob("*.json")}
    assert files == referenced
    assert asyncapi["asyncapi"] == "3.0.0"


def test_every_topic_of_the_configuration_is_a_channel(asyncapi: dict[str, Any]) -> None:
    """Each topic of [topics] is a channel address, with M partitions."""
    cfg = TopicsConfig()
    channels = {c["address"]: c for c in asyncapi["channels"].values()}
    assert set(cfg.by_role().values()) <= set(channels)
    for channel in channels.values():
        assert channel["bindings"]["kafka"]["partitions"] == cfg.partitions


def test_prices_says_how_to_read_it(asyncapi: dict[str, Any]) -> None:
    """prices carries prices and control records; the reader's rules are stated."""
    prices = next(c for c in asyncapi["channels"].values() if c["address"] == "prices")
    assert set(prices["messages"]) == {"price", "controlRecord"}
    for rule in ("read_committed", CONTROL_HEADER, "no key", "murmur2", "seq + 1"):
        assert rule in prices["description"], rule
    receive = asyncapi["operations"]["receivePrices"]
    assert receive["x-kafka-consumer-config"] == {"isolation.level": "read_committed"}
    for operation in asyncapi["operations"].values():
        channel = operation["channel"]["$ref"].removeprefix("#/channels/")
        for message in operation["messages"]:
            assert message["$ref"].startswith(f"#/channels/{channel}/messages/")


def test_schema_files_validate_what_the_structs_accept() -> None:
    """Each schema file is the struct's own schema (the generator adds only the dialect)."""
    for name, struct in schemas.RECORDS.items():
        committed = json.loads((DOCS / f"{schemas.SCHEMA_DIR}/{name}.json").read_text())
        generated = msgspec.json.schema(struct)["$defs"][struct.__name__]
        assert committed["title"] == generated["title"] == struct.__name__
        assert committed["properties"].keys() == generated["properties"].keys()
        assert committed.get("required") == generated.get("required")
