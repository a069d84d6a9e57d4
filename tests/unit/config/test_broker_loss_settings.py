"""Every client learns a lost broker's partitions' new leaders within a second."""

from __future__ import annotations

import types

from pricing_ha.config import BrokerConfig

REFRESH = "topic.metadata.refresh.interval.ms"


def test_every_client_refreshes_metadata_every_second() -> None:
    """Plain clients and NELI's both refresh metadata each second, not every 5 minutes."""
    broker = BrokerConfig()
    assert broker.client_config()[REFRESH] == 1000
    assert broker.client_config(defaults={"linger.ms": 5})[REFRESH] == 1000
    assert broker.neli_kafka()[REFRESH] == 1000


def test_the_librdkafka_table_overrides_the_refresh() -> None:
    """A deployment's [broker.librdkafka] value wins over the built-in one, for every client."""
    broker = BrokerConfig(librdkafka=types.MappingProxyType({REFRESH: "5000"}))
    assert broker.client_config()[REFRESH] == "5000"
    assert broker.neli_kafka()[REFRESH] == "5000"
