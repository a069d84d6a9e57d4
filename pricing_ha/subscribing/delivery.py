"""What a subscriber hands out and what it reads off a price's headers.

:class:`Delivery` is one price delivered to the application; :class:`Copy` one received copy
while the arbiter holds it (direct mode); :func:`price_headers` the telemetry a price's headers
carry, read so that a malformed header never costs the price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from confluent_kafka import Message

from pricing_ha.kafka.headers import header_int, header_list
from pricing_ha.publishing.pricing import Price

__all__ = ["Copy", "Delivery", "price_headers"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One price delivered to the application.

    Attributes:
        price: the decoded price.
        partition: the Kafka partition it was read from.
        offset: its offset there (of the winning copy, in direct mode).
        source: the publisher, ``group/member`` from the headers (``"?"`` if absent).
        gap_before: seqs missing right before this one (0 normally).
        switched_from: in direct mode, the previous primary publisher if this delivery is a
            publisher switch (see :mod:`pricing_ha.dedupe.arbitration`); else ``None``.
        silence_s: time since this instrument's previous delivery (0.0 for its first).
        publish_ns: the publisher's wall clock when it produced the price, or ``None``.
        received_ns: the subscriber's wall clock when the price was delivered (after any
            wait in the reorder window).
    """

    price: Price
    partition: int
    offset: int
    source: str
    gap_before: int
    switched_from: str | None
    silence_s: float
    publish_ns: int | None
    received_ns: int

    @property
    def instrument(self) -> str:
        """The instrument."""
        return self.price.instrument

    @property
    def seq(self) -> int:
        """The source sequence number."""
        return self.price.seq

    @property
    def latency_s(self) -> float:
        """Publish-to-receive time (source-to-receive if the publish time is unknown)."""
        start = self.source_time_ns if self.publish_ns is None else self.publish_ns
        return (self.received_ns - start) / 1e9

    @property
    def source_time_ns(self) -> int:
        """The source quote's time (Unix epoch nanoseconds)."""
        return self.price.source_time_ns


class Copy(NamedTuple):
    """One received copy, held by the arbiter until it wins or is dropped."""

    price: Price
    partition: int
    offset: int
    publish_ns: int | None


def _text(value: str | bytes | None) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else (value or "")


def price_headers(msg: Message) -> tuple[str, int | None, str | None, bool]:
    """``group/member``, ``publish_ns`` and ``traceparent`` from a price's headers, and whether
    one of them was malformed (``publish_ns`` not a decimal integer: then ``None``).

    Only telemetry comes from headers, so a malformed one never costs the price: bytes that are
    not UTF-8 are replaced, a bad ``publish_ns`` is left out.
    """
    group = member = "?"
    publish_ns = traceparent = None
    bad = False
    for key, value in header_list(msg.headers()):
        if key == "group":
            group = _text(value)
        elif key == "member":
            member = _text(value)
        elif key == "publish_ns":
            publish_ns = header_int(value)
            bad = bad or publish_ns is None
        elif key == "traceparent":
            traceparent = _text(value)
    return f"{group}/{member}", publish_ns, traceparent, bad
