"""How long the price path's consumers let the broker hold a fetch that finds nothing new.

Apache Kafka answers a waiting fetch as soon as a record arrives (``fetch.min.bytes`` 1), so
``fetch.wait.max.ms`` costs a consumer at the tail no latency; what it sets is how often an
idle consumer asks again: 1000 / FETCH_WAIT_MS fetch requests a second per consumer and
broker, which is most of the broker's work while prices trickle (``bench/broker/load.py``).
It also bounds how long a partition added to a consumer's assignment (a takeover) may wait
for the fetch already in flight before it is asked for, so it is not raised further.

While records flow, librdkafka asks again as soon as a fetch returns, so each fetch carries the
one or two records that arrived meanwhile: at 1,000 prices/s the price path made 2,400 fetch
requests a second, the largest share of the broker's work (``bench/broker/requests.py``).
:data:`PACED_FETCH` paces the price path's consumers instead: a fetch that returned records is
followed by the next one only :data:`FETCH_PACE_MS` later (``fetch.queue.backoff.ms``, which
librdkafka applies once a partition's queue holds ``queued.min.messages``, here one record), so
a busy consumer asks at most 1000 / FETCH_PACE_MS times a second per broker, whatever the
rate, at a cost of up to FETCH_PACE_MS (half of it on average) of latency per hop. An idle
consumer is unchanged: an empty fetch is followed at once by the next. A user's ``librdkafka``
table may override both settings.
"""

from __future__ import annotations

__all__ = ["FETCH_PACE_MS", "FETCH_WAIT_MS", "PACED_FETCH"]

#: ``fetch.wait.max.ms`` of the publishers' quote consumers, the relay's input and standby
#: tail, and subscribers.
FETCH_WAIT_MS = 100

#: The least time between two fetches that returned records, per partition, on the price
#: path's consumers (the publishers' quote consumers, the relay's input and standby tail).
FETCH_PACE_MS = 10

#: The settings that pace a price-path consumer's fetches (module docstring).
PACED_FETCH: dict[str, int] = {
    "fetch.wait.max.ms": FETCH_WAIT_MS,
    "queued.min.messages": 1,
    "fetch.queue.backoff.ms": FETCH_PACE_MS,
}
