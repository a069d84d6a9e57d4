"""How long the price path's consumers let the broker hold a fetch that finds nothing new.

Apache Kafka answers a waiting fetch as soon as a record arrives (``fetch.min.bytes`` 1), so
``fetch.wait.max.ms`` costs a consumer at the tail no latency; what it sets is how often an
idle consumer asks again: 1000 / FETCH_WAIT_MS fetch requests a second per consumer and
broker, which is most of the broker's work while prices trickle (``bench/broker/load.py``).
It also bounds how long a partition added to a consumer's assignment (a takeover) may wait
for the fetch already in flight before it is asked for, so it is not raised further.
"""

from __future__ import annotations

__all__ = ["FETCH_WAIT_MS"]

#: ``fetch.wait.max.ms`` of the publishers' quote consumers, the relay's input and standby
#: tail, and subscribers.
FETCH_WAIT_MS = 100
