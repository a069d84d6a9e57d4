"""Runnable uses of ``neli`` beyond pricing (each tested in
``tests/integration/neli/test_examples.py``).

* :mod:`examples.owner_lookup`: which member of group G owns key K now, and since when, read
  from the members' own heartbeats (no extra topic).
* :mod:`examples.global_timer`: a periodic job run exactly once per period across N processes,
  on exclusive NELI and :class:`neli.LeaderTasks`.
"""
