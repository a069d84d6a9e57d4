"""Serving a NELI member: the per-partition worker thread, the shared runner, health endpoints.

Publishers and relays are both NELI members that do Kafka work for the partitions they lead.
Leadership itself is decided by the :mod:`neli` library; this package turns its events into
work (:mod:`.worker`), runs a member from start to graceful stop (:mod:`.runner`) and serves its
``/healthz``, ``/readyz`` and ``/metrics`` (:mod:`.health`).
"""
