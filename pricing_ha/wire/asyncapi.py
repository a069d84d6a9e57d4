"""The AsyncAPI 3.0 document of pricing-ha's topics, built from the code's own topic names.

``docs/asyncapi.json`` is this document, written by ``python -m pricing_ha.wire.schemas
--write`` beside the JSON Schema files it references (``docs/schemas/*.json``); a unit test
fails when the committed copy differs. It says, for a reader in any language, what the prose
of docs/architecture.md (topics and partitioning) says: the keys, values and headers of every
topic, the control records on ``prices`` and how to skip them, the partitioning, the
``read_committed`` rule and the per-instrument sequence check.
"""

from __future__ import annotations

from typing import Any

from pricing_ha.config import TopicsConfig
from pricing_ha.kafka.headers import CONTROL_HEADER

__all__ = ["CONTRACT_VERSION", "SCHEMA_DIR", "build_document"]

#: The version of the wire contract (not of the package): raised when a record changes shape.
CONTRACT_VERSION = "1.0.0"
#: Where the schema files are, relative to the document.
SCHEMA_DIR = "schemas"
_KAFKA_BINDING = "0.5.0"

_PARTITIONING = (
    "Partition of an instrument: toPositive(murmur2(UTF-8 bytes of the symbol)) mod M, Kafka's "
    "Java default partitioner (librdkafka: partitioner=murmur2_random), on every keyed topic, "
    "all of which have the same partition count M: instrument slice k is partition k end to end."
)

_SUBSCRIBING = f"""Every record a subscriber should deliver, each (instrument, epoch, seq) once,
in order. Rules for a reader:

1. Read with **isolation.level=read_committed**. The relay writes in transactions; a deposed
   owner's aborted records are on the log and must never be seen.
2. **Skip control records**: a record is a control record if and only if it has **no key** and
   carries the header `{CONTROL_HEADER}` (any value, including kinds you do not know). A price
   always has a key. A control record of kind `reset` (header `instrument`) means an operator
   reset that instrument's mark: restart your sequence check of it.
3. **Check seqs per instrument** on (epoch, seq), from the value (never a header): within an
   epoch the next price has seq + 1; a larger seq is a gap (seqs lost upstream, the price is
   still good); a seq at or below the last is a duplicate, which the relay never writes
   (a defect: drop it). A larger epoch starts again from seq 1 (a restarted feed); a gap in
   a new epoch counts from its seq 1.
4. The key equals the value's instrument. Staleness is now - source_time_ns.

Consumer groups are optional: subscribers of pricing-ha assign every partition by hand and
commit nothing. Order holds within a partition, so per instrument."""


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"{SCHEMA_DIR}/{name}.json"}


def _key(description: str, *, present: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string" if present else "null"}
    return {
        "kafka": {"key": {**schema, "description": description}, "bindingVersion": _KAFKA_BINDING}
    }


_INSTRUMENT_KEY = "The instrument symbol, UTF-8. " + _PARTITIONING


def _messages() -> dict[str, Any]:
    dead_letter = {
        "payload": {"description": "The original record's value, cut at 64 KiB (any bytes)."},
        "headers": _ref("dead-letter-headers"),
        "bindings": _key("The original record's key, cut at 1 KiB (absent if it had none)."),
    }
    return {
        "Quote": {
            "name": "quote",
            "title": "Market-data quote",
            "payload": _ref("quote"),
            "headers": _ref("quote-headers"),
            "bindings": _key(_INSTRUMENT_KEY),
        },
        "RawPrice": {
            "name": "raw-price",
            "title": "A publishing group's price",
            "summary": "Both groups write one each for a quote: byte-identical values.",
            "payload": _ref("price"),
            "headers": _ref("raw-price-headers"),
            "bindings": _key(_INSTRUMENT_KEY),
        },
        "Price": {
            "name": "price",
            "title": "Deduplicated price",
            "summary": "The winning raw copy's value, re-encoded canonically by the relay.",
            "payload": _ref("price"),
            "headers": _ref("price-headers"),
            "bindings": _key(_INSTRUMENT_KEY),
        },
        "ControlRecord": {
            "name": "control-record",
            "title": "Relay or operator control record (not a price: skip it)",
            "summary": f"No key and the header {CONTROL_HEADER}: skip it.",
            "payload": {
                "description": "Empty (zero bytes) for every kind but checkpoint.",
                "anyOf": [_ref("checkpoint"), {"type": "null"}],
            },
            "headers": _ref("control-headers"),
            "bindings": _key("None: a control record never has a key.", present=False),
        },
        "QuoteDeadLetter": {"name": "quote-dead-letter", "title": "A refused quote", **dead_letter},
        "RawPriceDeadLetter": {
            "name": "raw-price-dead-letter",
            "title": "A refused raw price",
            **dead_letter,
        },
        "Heartbeat": {
            "name": "neli-heartbeat",
            "title": "NELI heartbeat (internal to the groups)",
            "payload": _ref("neli-heartbeat"),
            "bindings": _key("None: written to an explicit partition.", present=False),
        },
    }


def _channel(
    address: str, cfg: TopicsConfig, description: str, messages: dict[str, str]
) -> dict[str, Any]:
    return {
        "address": address,
        "description": description,
        "messages": {k: {"$ref": f"#/components/messages/{v}"} for k, v in messages.items()},
        "bindings": {
            "kafka": {
                "topic": address,
                "partitions": cfg.partitions,
                "bindingVersion": _KAFKA_BINDING,
            }
        },
    }


def _channels(cfg: TopicsConfig) -> dict[str, Any]:
    return {
        "quotes": _channel(
            cfg.quotes,
            cfg,
            "Market data in, one quote per record, from the feed. " + _PARTITIONING,
            {"quote": "Quote"},
        ),
        "neli": _channel(
            cfg.neli,
            cfg,
            "NELI heartbeats of every group (internal; retention.ms is short: stale heartbeats "
            "are worthless). Not for subscribers.",
            {"heartbeat": "Heartbeat"},
        ),
        "pricesRaw": _channel(
            cfg.raw,
            cfg,
            "Prices from every leader of both publishing groups: normally two copies of each "
            "(instrument, epoch, seq), more around fail-overs. Read by the relay and by direct "
            "subscribers, which arbitrate the copies themselves. " + _PARTITIONING,
            {"rawPrice": "RawPrice"},
        ),
        "prices": _channel(
            cfg.prices,
            cfg,
            "The deduplicated prices subscribers read, written by the relay owner of each "
            "partition, and the relay's control records beside them. "
            + _PARTITIONING
            + "\n\n"
            + _SUBSCRIBING,
            {"price": "Price", "controlRecord": "ControlRecord"},
        ),
        "quotesDeadLetters": _channel(
            cfg.dlq,
            cfg,
            "Quotes a publisher refused, with the reason; each group dead-letters on its own, "
            "so a bad quote usually appears twice (dedupe by source position).",
            {"deadLetter": "QuoteDeadLetter"},
        ),
        "pricesRawDeadLetters": _channel(
            cfg.raw_dlq,
            cfg,
            "Raw prices the relay refused, with the reason.",
            {"deadLetter": "RawPriceDeadLetter"},
        ),
    }


def _operation(action: str, channel: str, messages: list[str], summary: str) -> dict[str, Any]:
    return {
        "action": action,
        "channel": {"$ref": f"#/channels/{channel}"},
        "messages": [{"$ref": f"#/channels/{channel}/messages/{m}"} for m in messages],
        "summary": summary,
    }


def _operations() -> dict[str, Any]:
    return {
        "sendQuotes": _operation("send", "quotes", ["quote"], "The feed writes quotes."),
        "receiveQuotes": _operation("receive", "quotes", ["quote"], "Each group's leaders."),
        "sendHeartbeats": _operation("send", "neli", ["heartbeat"], "Every NELI member."),
        "sendRawPrices": _operation("send", "pricesRaw", ["rawPrice"], "Publishing leaders."),
        "receiveRawPrices": _operation(
            "receive", "pricesRaw", ["rawPrice"], "The relay; direct subscribers."
        ),
        "sendPrices": _operation(
            "send", "prices", ["price", "controlRecord"], "The relay, in transactions."
        ),
        "receivePrices": {
            **_operation(
                "receive",
                "prices",
                ["price", "controlRecord"],
                "Subscribers: read_committed, skip control records, check seqs per instrument.",
            ),
            "description": _SUBSCRIBING,
            "x-kafka-consumer-config": {"isolation.level": "read_committed"},
        },
        "sendQuoteDeadLetters": _operation(
            "send", "quotesDeadLetters", ["deadLetter"], "Publishers."
        ),
        "sendRawPriceDeadLetters": _operation(
            "send", "pricesRawDeadLetters", ["deadLetter"], "The relay."
        ),
    }


def build_document(cfg: TopicsConfig | None = None) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of the topics of ``cfg`` (default: the default names)."""
    cfg = cfg or TopicsConfig()
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "pricing-ha",
            "version": CONTRACT_VERSION,
            "description": "Highly available pricing over Apache Kafka: the records on its "
            "topics. Topic names are the defaults of [topics] (configurable); M, the partition "
            f"count, is topics.partitions ({cfg.partitions} by default) on every topic.",
        },
        "defaultContentType": "application/json",
        "servers": {
            "local": {
                "host": "127.0.0.1:9092",
                "protocol": "kafka",
                "description": "`pricing-ha broker`: the local Apache Kafka.",
            }
        },
        "channels": _channels(cfg),
        "operations": _operations(),
        "components": {"messages": _messages()},
    }
