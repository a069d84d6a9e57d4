"""Unit tests of ``pricing_ha.cli`` (the commands)."""
