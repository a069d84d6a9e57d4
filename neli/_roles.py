"""Roles and their partitions.

A role is any key (an instrument symbol, say). Its *index* is Kafka's murmur2 hash of the key's
bytes made positive, exactly what the Java client's default partitioner and librdkafka's
``murmur2_random`` partitioner compute, so a producer keyed by the role lands on the same
partition that NELI says leads the role: ``partition = index mod M``.

Note that librdkafka's *own* default partitioner is ``consistent_random`` (CRC32); producers
that must agree with NELI set ``partitioner=murmur2_random`` (see :data:`KAFKA_PARTITIONER`).
"""

from __future__ import annotations

#: The librdkafka ``partitioner`` setting that agrees with :func:`role_partition`.
KAFKA_PARTITIONER = "murmur2_random"

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data``, as a signed 32-bit integer like Java's.

    Args:
        data: the key bytes.

    Returns:
        The hash in ``[-2**31, 2**31)``.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _key_bytes(role: str | bytes) -> bytes:
    return role.encode("utf-8") if isinstance(role, str) else role


def role_index(role: str | bytes) -> int:
    """The role's index: murmur2 of its UTF-8 bytes, made positive (``& 0x7fffffff``)."""
    return murmur2(_key_bytes(role)) & 0x7FFFFFFF


def role_partition(role: str | bytes, partitions: int) -> int:
    """The NELI partition whose leader leads ``role``: ``role_index(role) mod partitions``.

    Raises:
        ValueError: if ``partitions`` is not positive.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be positive, got {partitions}")
    return role_index(role) % partitions
