"""The subscriber library: typed prices from ``prices`` (or arbitrated from ``prices.raw``).

:class:`PriceClient` is the standalone client (bootstrap servers and a topic; see
docs/consuming.md); :mod:`.subscriber` is what ``pricing-ha subscribe`` runs on the
application's configuration.
"""

from pricing_ha.subscribing.client import Gap, Price, PriceClient

__all__ = ["Gap", "Price", "PriceClient"]
