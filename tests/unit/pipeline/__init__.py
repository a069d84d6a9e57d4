"""Unit tests of ``pricing_ha.pipeline`` (the analytical path)."""
