"""Unit tests of ``pricing_ha.kafka`` (producers, positions, partitioner, topics, dead letters)."""
