"""Market data for ``md.quotes``: synthetic and CSV quote sources, and the producing loop."""
