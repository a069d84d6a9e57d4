"""Where dedupe happens: arbitration of the two groups' copies, and the relay writing ``prices``.

* :mod:`.arbitration`: first copy of each ``(instrument, seq)`` wins (A/B line arbitration);
* :mod:`.relay`: ``pricing-ha dedupe``, exclusive owner of each ``prices`` partition, and
  :mod:`.relay_worker`, its partition worker (takeover, the hot path); a move's two sides:
  :mod:`.succession` (what the next owner establishes before emitting) and :mod:`.handover`
  (the old owner emitting until it is asked to stop); :mod:`.raw_input` (where
  ``prices.raw[k]`` is read from) and :mod:`.read_ahead` (input read during the grace period);
* :mod:`.records`: what the relay reads from ``prices.raw``;
* :mod:`.standby`: the hot standby: every partition of ``prices`` tailed;
* :mod:`.control`: the control records on ``prices``, and the view of a partition they fold
  into;
* :mod:`.output`: what the relay writes (``prices``, its dead-letter topic, fail-over spans).
"""
