"""Kafka's default (murmur2) partitioner, computed in Python."""

from __future__ import annotations

import pytest

from pricing_ha.kafka.partitioning import KEYED_PRODUCER_SETTINGS, instrument_partition, murmur2


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # Reference values of Kafka's Java Utils.murmur2.
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    """murmur2 gives the Java client's values, tails of every length included."""
    assert murmur2(data) == expected


def test_instrument_partition_is_in_range_and_stable() -> None:
    """Partitions are in [0, M) and depend only on the symbol and M."""
    for m in (1, 4, 7, 12):
        parts = [instrument_partition(f"SYM{i:03d}", m) for i in range(300)]
        assert all(0 <= p < m for p in parts)
        assert parts == [instrument_partition(f"SYM{i:03d}", m) for i in range(300)]
    assert len({instrument_partition(f"SYM{i:03d}", 4) for i in range(300)}) == 4


def test_instrument_partition_uses_utf8_bytes() -> None:
    """Non-ASCII symbols hash their UTF-8 encoding, like the Kafka key."""
    assert instrument_partition("é", 1000) == (murmur2("é".encode()) & 0x7FFFFFFF) % 1000


def test_instrument_partition_rejects_bad_count() -> None:
    """A non-positive partition count is a programming error."""
    with pytest.raises(ValueError, match="positive"):
        instrument_partition("A", 0)


def test_keyed_producers_use_murmur2() -> None:
    """The shared producer setting selects librdkafka's Java-compatible partitioner."""
    assert KEYED_PRODUCER_SETTINGS == {"partitioner": "murmur2_random"}
