"""Unit tests of ``pricing_ha.publishing`` (quotes, pricing, the publisher)."""
