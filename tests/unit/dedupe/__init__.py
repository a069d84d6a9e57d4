"""Unit tests of ``pricing_ha.dedupe`` (the relay: hot path, standby, detector, lifecycles)."""
