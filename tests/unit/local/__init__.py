"""Unit tests of ``pricing_ha.local`` (local Kafka, the demo, its verdict and traces)."""
