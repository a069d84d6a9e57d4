"""The Spark pipeline against a real broker."""
