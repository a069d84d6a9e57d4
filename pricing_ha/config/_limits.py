"""The ``[limits]`` section: bounds on per-instrument state (see :class:`LimitsConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from pricing_ha.config._broker import BrokerConfig
from pricing_ha.config._sections import check, check_ms
from pricing_ha.errors import ConfigError

__all__ = [
    "CHECKPOINT_BYTES_PER_INSTRUMENT",
    "CHECKPOINT_OVERHEAD_BYTES",
    "MAX_INSTRUMENT_BYTES",
    "LimitsConfig",
    "message_max_bytes",
]


#: Bytes a checkpoint spends per instrument, at most, for a symbol of up to
#: :data:`MAX_INSTRUMENT_BYTES` and a 19-digit seq (``"SYMBOL":1234,`` with room for escapes
#: and an epoch): what the check of ``max_instruments_per_partition`` against the message size
#: assumes.
CHECKPOINT_BYTES_PER_INSTRUMENT = 100
#: What a checkpoint needs beside its marks (terms, offsets, requests), and the record's own
#: overhead, at most.
CHECKPOINT_OVERHEAD_BYTES = 4096
#: The longest instrument name (UTF-8 bytes) the relay keeps state for; the same bound as a
#: quote's symbol (:mod:`pricing_ha.publishing.quotes`).
MAX_INSTRUMENT_BYTES = 64
#: librdkafka's default ``message.max.bytes``, when ``[broker.librdkafka]`` does not set it.
DEFAULT_MESSAGE_MAX_BYTES = 1_000_000


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitsConfig:
    """Bounds on per-instrument state, so that a flood of new instrument names cannot grow a
    process without limit (docs/architecture.md, "Bounded state").

    Attributes:
        max_instruments_per_partition: instruments the relay keeps a high-water mark for on
            each partition (its arbiter, its standby view, its checkpoints), and a publisher
            keeps a last seq for. The relay dead-letters a price of a *new* instrument on a
            full partition (reason ``instrument limit``) and never forgets a mark: forgetting
            one would let a late copy of an old seq through again. A publisher forgets its
            least recently quoted instrument instead (the relay's mark still drops a repeated
            seq). A checkpoint at the limit must fit the producer's ``message.max.bytes``
            (``[broker.librdkafka]``, default 1000000) at
            :data:`CHECKPOINT_BYTES_PER_INSTRUMENT` bytes an instrument. Default 8000.
        warn_interval_ms: the least time between two warnings of one kind about refused or
            evicted instruments (the others are counted and summarised). Default 10000.
    """

    max_instruments_per_partition: int = 8_000
    warn_interval_ms: int = 10_000

    def __post_init__(self) -> None:
        check(
            1 <= self.max_instruments_per_partition <= 10_000_000,
            self,
            "max_instruments_per_partition",
            f"must be 1..10000000, got {self.max_instruments_per_partition}",
        )
        check_ms(self, "warn_interval_ms", self.warn_interval_ms, 100)

    def checkpoint_bytes(self) -> int:
        """The largest checkpoint a partition at the limit may need (see the attributes)."""
        return (
            self.max_instruments_per_partition * CHECKPOINT_BYTES_PER_INSTRUMENT
            + CHECKPOINT_OVERHEAD_BYTES
        )


def message_max_bytes(broker: BrokerConfig) -> int:
    """The producers' ``message.max.bytes`` (``[broker.librdkafka]``, else librdkafka's
    default); a record larger than this fails to produce."""
    text = broker.librdkafka.get("message.max.bytes", str(DEFAULT_MESSAGE_MAX_BYTES))
    if not (text.isascii() and text.isdigit() and 4 <= len(text) <= 10 and int(text) >= 1000):
        raise ConfigError(
            "AppConfig",
            "broker.librdkafka.message.max.bytes",
            f"must be an integer of at least 1000, got {text!r}",
        )
    return int(text)
