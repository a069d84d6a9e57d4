"""Unit tests of ``pricing_ha.subscribing`` (the subscriber and its client)."""
