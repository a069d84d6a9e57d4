"""How the price path's consumers fetch: how long the broker may hold a fetch that finds nothing
new, and the opt-in settings that pace fetches while records flow.

Apache Kafka answers a waiting fetch as soon as a record arrives (``fetch.min.bytes`` 1), so
``fetch.wait.max.ms`` costs a consumer at the tail no latency; what it sets is how often an
idle consumer asks again: 1000 / FETCH_WAIT_MS fetch requests a second per consumer and
broker, which is most of the broker's work while prices trickle (``bench/broker/load.py``).
It also bounds how long a partition added to a consumer's assignment (a takeover) may wait
for the fetch already in flight before it is asked for, so it is not raised further.

While records flow, librdkafka asks again as soon as a fetch returns, so each fetch carries the
one or two records that arrived meanwhile: at 1,000 prices/s the price path makes about 2,500
fetch requests a second, the largest share of the broker's work (``bench/broker/requests.py``).
:data:`PACING`, set in a process's ``[broker.librdkafka]``, paces its consumers instead:
librdkafka holds a partition back for ``fetch.queue.backoff.ms`` when it would fetch it while
the consumer's queue still holds ``queued.min.messages`` records (here one), at a cost of up to
that much latency per hop. A consumer that has already drained its queue is asked again at
once, so what pacing saves depends on how busy the consumer is: a lone test consumer at
1,000 records/s made 141-156 fetch requests a second paced and 80-136 unpaced, while at
1,000 prices/s the whole price path's broker requests fell from 5,846 to 4,055 a second
(docs/measurements.md, on paced fetches and on the landing CI of the structs change).

It is not the default: the same rule holds back a consumer near its capacity, which rarely
finds its queue empty and so idles after each drain. With 5 ms the price path's highest
sustained rate fell from 15,259 to 12,207 prices/s, with 10 ms to 9,766 (docs/benchmarks.md).
"""

from __future__ import annotations

__all__ = ["FETCH_WAIT_MS", "PACING"]

#: ``fetch.wait.max.ms`` of the publishers' quote consumers, the relay's input and standby
#: tail, its liveness reader, and subscribers.
FETCH_WAIT_MS = 100

#: ``[broker.librdkafka]`` settings that pace a process's consumers (module docstring): fewer
#: requests for the broker at moderate rates, a lower highest sustained rate.
PACING: dict[str, str] = {"queued.min.messages": "1", "fetch.queue.backoff.ms": "5"}
