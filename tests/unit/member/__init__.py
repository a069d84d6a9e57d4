"""Unit tests of ``pricing_ha.member`` (the worker and runner of a member)."""
