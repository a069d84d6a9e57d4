"""The latency probe's split of a relayed price's latency by the stamps it carries."""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from bench.price_path.latency_probe import split, stamps


def _msg(headers: list[tuple[str, str | bytes | None]]) -> Message:
    return Message(topic="prices", partition=0, offset=0, key=b"EURUSD", headers=headers)


def test_a_relayed_price_splits_into_three_segments_that_add_up() -> None:
    """source 1 s, published 1.004 s, relayed 1.010 s, received 1.025 s: 4, 6 and 15 ms."""
    got = stamps(_msg([("seq", b"7"), ("publish_ns", b"1004000000"), ("relay_ns", b"1010000000")]))
    assert got == (1_004_000_000, 1_010_000_000)
    parts = split(1_000_000_000, got, 1_025_000_000)
    assert parts == pytest.approx((0.004, 0.006, 0.015))
    assert sum(parts) == pytest.approx(0.025)


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [("publish_ns", b"10")],
        [("relay_ns", b"10")],
        [("publish_ns", b"x"), ("relay_ns", b"10")],
    ],
)
def test_a_record_without_both_stamps_is_not_split(
    headers: list[tuple[str, str | bytes | None]],
) -> None:
    """The reference's forwarded records (and malformed stamps) give no segments."""
    assert stamps(_msg(headers)) is None
