"""Unit tests of ``neli`` (the leadership library)."""
