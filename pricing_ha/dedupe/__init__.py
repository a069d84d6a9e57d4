"""Where dedupe happens: arbitration of the two groups' copies, and the relay writing ``prices``.

* :mod:`.arbitration`: first copy of each ``(instrument, seq)`` wins (A/B line arbitration);
* :mod:`.relay`: ``pricing-ha dedupe``, exclusive owner of each ``prices`` partition, and
  :mod:`.relay_worker`, its partition worker (takeover, letting go, starting over), with its
  Kafka clients and group ids in :mod:`.relay_clients` and its counters in :mod:`.stats`;
  :mod:`.lifecycle`: where the member stands on each partition (STANDBY, PROBING,
  SUSPECTING, TAKING_OVER, OWNING, HANDING_OVER), one object per partition with checked
  transitions, drawn in docs/relay.md;
  :mod:`.hot_path`: arbitration, output and commits of a batch, and what happens to a
  partition paused or whose output failed; a move's two sides: :mod:`.succession` (what the
  next owner establishes before emitting: the previous owner fenced, a takeover marker; after
  its grace period's probes: :mod:`.grace_period`) and
  :mod:`.handover` (the old owner emitting until it is asked to stop);
  :mod:`.raw_input` (where ``prices.raw[k]`` is read from) and :mod:`.read_ahead` (input read
  during the grace period);
* :mod:`.records`: what the relay reads from ``prices.raw``; :mod:`.relayed`: what it writes
  on ``prices`` of it (allow-listed headers, the canonical value);
* :mod:`.standby`: the hot standby: every partition of ``prices`` tailed, each started from
  its latest checkpoint (:mod:`.checkpoint_search`);
* detection of a failed owner without the group: :mod:`.liveness` (the relay members'
  heartbeats as received), :mod:`.detector` (which quiet partition this member succeeds to)
  and :mod:`.suspicion` (taking it over, holding it until the group follows; docs/relay.md);
* :mod:`.control`: the control records on ``prices``, and the view of a partition they fold
  into; :mod:`.control_writer`: writing them (markers, checkpoints, ticks);
* :mod:`.output`: what the relay writes (``prices``, its dead-letter topic, fail-over spans:
  :mod:`.failover_spans`), through the producers of :mod:`.output_producers` (fencing:
  :mod:`.fences`; a wedged producer replaced).
"""
