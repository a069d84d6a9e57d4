"""The subscriber library: typed prices from ``prices`` (or arbitrated from ``prices.raw``)."""
