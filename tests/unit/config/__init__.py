"""Unit tests of ``pricing_ha.config`` (settings, validation, client translations)."""
