"""Unit tests of ``pricing_ha.feed`` (the quote feed)."""
