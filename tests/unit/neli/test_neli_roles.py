"""Roles: Kafka's murmur2, the role index and the role's partition."""

from __future__ import annotations

import random

import pytest

from neli.partitioner import KAFKA_PARTITIONER, murmur2, role_index, role_partition

#: Kafka's own test vectors (clients/src/test/.../UtilsTest.java, testMurmur2).
KAFKA_VECTORS = [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
]


def _java_murmur2(data: bytes) -> int:
    """A line-by-line port of Kafka's ``Utils.murmur2`` using Java int overflow, as a reference."""

    def i32(x: int) -> int:
        x &= 0xFFFFFFFF
        return x - (1 << 32) if x & 0x80000000 else x

    def ushr(x: int, n: int) -> int:  # Java's >>>
        return (x & 0xFFFFFFFF) >> n

    length = len(data)
    seed = i32(0x9747B28C)
    m = 0x5BD1E995
    r = 24
    h = i32(seed ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = i32(data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24))
        k = i32(k * m)
        k = i32(k ^ ushr(k, r))
        k = i32(k * m)
        h = i32(h * m)
        h = i32(h ^ k)
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h = i32(h ^ (data[tail + 2] << 16))
    if rest >= 2:
        h = i32(h ^ (data[tail + 1] << 8))
    if rest >= 1:
        h = i32(h ^ data[tail])
        h = i32(h * m)
    h = i32(h ^ ushr(h, 13))
    h = i32(h * m)
    return i32(h ^ ushr(h, 15))


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka_test_vectors(key: str, expected: int) -> None:
    """murmur2 gives Kafka's published hash for each of Kafka's test keys."""
    assert murmur2(key.encode()) == expected


def test_murmur2_of_the_empty_key() -> None:
    """The empty key hashes to Kafka's value for it (0x106e08d9, as librdkafka's tests say)."""
    assert murmur2(b"") == 0x106E08D9


def test_murmur2_matches_a_java_port_on_random_keys() -> None:
    """murmur2 agrees with a direct Java-semantics port on random keys of every tail length."""
    rng = random.Random(42)
    for length in range(40):
        for _ in range(5):
            key = bytes(rng.randrange(256) for _ in range(length))
            assert murmur2(key) == _java_murmur2(key), key


def test_murmur2_is_a_signed_32_bit_value() -> None:
    """murmur2 returns Java's signed int range, negative for some keys."""
    hashes = [murmur2(f"key-{i}".encode()) for i in range(200)]
    assert all(-(2**31) <= h < 2**31 for h in hashes)
    assert any(h < 0 for h in hashes)


@pytest.mark.parametrize("role", ["EURUSD", "AAPL", "", "€uro-ünïcode"])
def test_str_and_utf8_bytes_are_the_same_role(role: str) -> None:
    """A str role and its UTF-8 bytes have the same index and partition."""
    assert role_index(role) == role_index(role.encode("utf-8"))
    assert role_partition(role, 7) == role_partition(role.encode("utf-8"), 7)


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_role_index_is_the_positive_hash(key: str, expected: int) -> None:
    """role_index is murmur2 with the sign bit cleared, as Kafka's toPositive does."""
    index = role_index(key)
    assert index == expected & 0x7FFFFFFF
    assert index >= 0


def test_role_index_is_never_negative() -> None:
    """role_index is non-negative for many keys, including those whose hash is negative."""
    assert all(role_index(f"instrument-{i}") >= 0 for i in range(500))


@pytest.mark.parametrize("partitions", [1, 2, 3, 12, 64])
def test_role_partition_is_in_range(partitions: int) -> None:
    """role_partition is index mod M and always within [0, M)."""
    for i in range(300):
        role = f"SYM{i}"
        p = role_partition(role, partitions)
        assert 0 <= p < partitions
        assert p == role_index(role) % partitions


def test_role_partition_spreads_roles() -> None:
    """Roles land on every partition, not just a few."""
    assert {role_partition(f"SYM{i}", 8) for i in range(200)} == set(range(8))


def test_role_partition_of_a_known_key() -> None:
    """role_partition of a Kafka test key matches Kafka's default partitioner's arithmetic."""
    assert role_partition("21", 10) == (-973932308 & 0x7FFFFFFF) % 10


@pytest.mark.parametrize("partitions", [0, -1])
def test_role_partition_needs_a_positive_partition_count(partitions: int) -> None:
    """role_partition refuses a partition count below 1."""
    with pytest.raises(ValueError, match="partitions must be positive"):
        role_partition("EURUSD", partitions)


def test_kafka_partitioner_setting_names_murmur2() -> None:
    """The librdkafka partitioner that agrees with role_partition is murmur2_random."""
    assert KAFKA_PARTITIONER == "murmur2_random"
